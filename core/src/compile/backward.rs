//! The backward-and-update program: input gradients, then each layer's parameter gradients
//! with their SGD updates fused into the GEMMs' epilogues.

extern crate alloc;
use alloc::vec::Vec;

use super::{CompileError, Compiler};
use crate::graph::{Op, TensorId, TensorKind};
use crate::tiler::{CastTo, Epilogue, GemmLayout, GemmShape, MatrixView, Update};

impl Compiler<'_> {
    pub(super) fn backward(&mut self) -> Result<(), CompileError> {
        let ops = &self.graph.backward;
        // A layer's parameter gradients wait for its input gradient, which reads the bf16 copy
        // of the weights that the updates fused into them overwrite.
        let mut waiting: Vec<Op> = Vec::new();
        let on_host = super::logits_relu(self.graph);
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                Op::SoftmaxCrossEntropyGrad { .. } => i += 1, // on the host, between the programs
                // A last ReLU's too, on the softmax's gradient.
                Op::ReluGrad { dx, .. } if Some(dx) == on_host => i += 1,
                op @ (Op::BiasGrad { .. } | Op::DenseGradWeight { .. }) => {
                    waiting.push(op);
                    i += 1;
                }
                Op::DenseGradInput { dy, w, dx } => {
                    let layer = self.layer_of(w);
                    // Reshapes of the gradient (a flatten's) share its buffers.
                    let (mut next, mut grad) = (i + 1, dx);
                    while let Some(&Op::Reshape { x, y }) = ops.get(next) {
                        if x != grad {
                            break;
                        }
                        (next, grad) = (next + 1, y);
                    }
                    // The vector unit reads the gradient as f32 words (a pooling's, or a
                    // convolution's patches'); anything else reads bf16 elements, through the
                    // ReLU before it when there is one.
                    let words = self.buffers[dx as usize].words;
                    let (mask, out) = match ops.get(next) {
                        Some(&Op::ReluGrad { dy: rdy, y, dx: rdx })
                            if rdy == grad && words.is_none() =>
                        {
                            (Some(self.words(y)), rdx)
                        }
                        _ => (None, dx),
                    };
                    let shape = GemmShape { m: self.rows(dy), k: self.cols(dy), n: self.cols(dx) };
                    let a = MatrixView::row_major(self.elems(dy), shape.k);
                    let b = MatrixView::row_major(self.elems(w), shape.k).t();
                    let epilogue = Epilogue {
                        relu_grad_mask: mask,
                        store: words.is_some(),
                        cast: words
                            .is_none()
                            .then(|| CastTo { addr: self.elems(out), requant: None }),
                        ..Epilogue::STORE
                    };
                    let layout = GemmLayout::new(a, b, words.unwrap_or(0));
                    let name = match self.graph.info(dx).kind {
                        TensorKind::Grad(x) if self.is_patches(x) => "conv_grad_input",
                        _ => "dense_grad_input",
                    };
                    self.gemm(1, (name, layer), shape, layout, epilogue)?;
                    i = next + mask.is_some() as usize;
                    self.parameter_gradients(&mut waiting)?;
                }
                Op::Reshape { .. } => i += 1,
                Op::MaxPoolGrad { dy, x, dx, geom } => {
                    // The ReLU before the pooling (its output is the pooling's input).
                    let relu = match ops.get(i + 1) {
                        Some(&Op::ReluGrad { dy: rdy, y, dx: out }) if rdy == dx && y == x => {
                            Some(out)
                        }
                        _ => None,
                    };
                    self.max_pool_grad((dy, x, dx), geom, relu)?;
                    i += 1 + relu.is_some() as usize;
                }
                Op::AvgPoolGrad { dy, dx, geom } => {
                    // The ReLU before the pooling, whose output (the pooling's input) masks it.
                    let relu = match ops.get(i + 1) {
                        Some(&Op::ReluGrad { dy: rdy, y, dx: out }) if rdy == dx => Some((y, out)),
                        _ => None,
                    };
                    self.avg_pool_grad(dy, dx, geom, relu)?;
                    i += 1 + relu.is_some() as usize;
                }
                Op::Col2im { dy, dx, geom } => {
                    let relu = match ops.get(i + 1) {
                        Some(&Op::ReluGrad { dy: rdy, y, dx: out })
                            if rdy == dx && self.buffers[dx as usize].words.is_none() =>
                        {
                            Some((y, out))
                        }
                        _ => None,
                    };
                    self.col2im(dy, dx, geom, relu)?;
                    i += 1 + relu.is_some() as usize;
                }
                _ => return Err(CompileError::Unsupported { op: "backward op" }),
            }
        }
        self.parameter_gradients(&mut waiting)?;
        if self.updates != self.graph.update.len() {
            return Err(CompileError::Unsupported { op: "sgd of a tensor that is not a gradient" });
        }
        Ok(())
    }

    /// A weight or bias gradient as a GEMM, with the SGD update of its parameter fused into the
    /// epilogue when the graph trains it (the gradient then never leaves the accumulators).
    fn parameter_gradient(&mut self, op: Op) -> Result<(), CompileError> {
        let (name, grad, shape, a, b) = match op {
            Op::BiasGrad { dy, db } => {
                let shape = GemmShape { m: 1, k: self.rows(dy), n: self.cols(dy) };
                let a = MatrixView::row_major(self.ones.unwrap_or(0), shape.k);
                let b = MatrixView::row_major(self.elems(dy), shape.n);
                (["bias_grad", "bias_grad+sgd"], db, shape, a, b)
            }
            Op::DenseGradWeight { x, dy, dw } => {
                let shape = GemmShape { m: self.cols(x), k: self.rows(x), n: self.cols(dy) };
                let a = MatrixView::row_major(self.elems(x), shape.m).t();
                let b = MatrixView::row_major(self.elems(dy), shape.n);
                let names = match self.is_patches(x) {
                    true => ["conv_grad_weight", "conv_grad_weight+sgd"],
                    false => ["dense_grad_weight", "dense_grad_weight+sgd"],
                };
                (names, dw, shape, a, b)
            }
            _ => return Err(CompileError::Unsupported { op: "parameter gradient" }),
        };
        let layer = self.layer_of_grad(grad);
        let update = self.update_of(grad);
        self.updates += update.is_some() as usize;
        let epilogue = update.map_or(Epilogue::STORE, Epilogue::update);
        let name = name[update.is_some() as usize];
        self.gemm(1, (name, layer), shape, GemmLayout::new(a, b, self.words(grad)), epilogue)
    }

    /// A layer's waiting parameter gradients: its weight's and bias's in one GEMM when the
    /// array is weight-stationary ([`Compiler::fused_gradients`]), else one GEMM each.
    fn parameter_gradients(&mut self, waiting: &mut Vec<Op>) -> Result<(), CompileError> {
        let ops: Vec<Op> = core::mem::take(waiting);
        let pair = match ops[..] {
            [Op::BiasGrad { dy, db }, Op::DenseGradWeight { x, dy: wdy, dw }]
            | [Op::DenseGradWeight { x, dy: wdy, dw }, Op::BiasGrad { dy, db }]
                if dy == wdy =>
            {
                Some((x, dy, dw, db))
            }
            _ => None,
        };
        match pair {
            Some(p) if self.fused_gradients(p)? => Ok(()),
            _ => ops.into_iter().try_for_each(|op| self.parameter_gradient(op)),
        }
    }

    /// `[X^T; 1^T] dY = [dW; db]`: the weight and bias gradients of a layer as one GEMM whose A
    /// has the ones vector as its last row (the tiler's `a_last_row`), with both updates in its
    /// epilogue, over the `[W; b]` matrices `plan_params` lays out. The bias gradient then
    /// costs one more row of the weight gradient's matmuls instead of a GEMM of its own (one-row
    /// matmuls that each pay a weight load). Its bits are the separate GEMM's: the same products,
    /// summed in the same k order. Returns false, emitting nothing, where it does not apply
    /// (output-stationary arrays, or an update on one parameter only).
    fn fused_gradients(
        &mut self,
        (x, dy, dw, db): (TensorId, TensorId, TensorId, TensorId),
    ) -> Result<bool, CompileError> {
        let (uw, ub) = (self.update_of(dw), self.update_of(db));
        if self.config.dataflow != crate::config::Dataflow::WeightStationary
            || uw.is_some() != ub.is_some()
        {
            return Ok(false);
        }
        let (m, n) = (self.cols(x), self.cols(dy));
        let shape = GemmShape { m: m + 1, k: self.rows(x), n };
        let layout = GemmLayout {
            a: MatrixView::row_major(self.elems(x), m).t(),
            b: MatrixView::row_major(self.elems(dy), n),
            c: self.words(dw),
            a_last_row: self.ones,
        };
        self.updates += 2 * uw.is_some() as usize;
        let epilogue = uw.map_or(Epilogue::STORE, Epilogue::update);
        let names = match self.is_patches(x) {
            true => ["conv_grad_weight+bias", "conv_grad_weight+bias+sgd"],
            false => ["dense_grad_weight+bias", "dense_grad_weight+bias+sgd"],
        };
        let name = names[uw.is_some() as usize];
        self.gemm(1, (name, self.layer_of_grad(dw)), shape, layout, epilogue)?;
        Ok(true)
    }

    /// The SGD update the graph applies with gradient `grad`, as the tiler's epilogue.
    fn update_of(&self, grad: TensorId) -> Option<Update> {
        let sgd = self.graph.sgd?;
        self.graph.update.iter().find_map(|op| match *op {
            Op::Sgd { param, grad: g, velocity } if g == grad => Some(Update {
                param: self.words(param),
                velocity: velocity.map(|v| self.words(v)),
                copy: self.buffers[param as usize].elems,
                neg_lr: (-sgd.lr).to_bits(),
                momentum: sgd.momentum.to_bits(),
                weight_decay: sgd.weight_decay.to_bits(),
            }),
            _ => None,
        })
    }

    fn layer_of_grad(&self, g: TensorId) -> u8 {
        match self.graph.info(g).kind {
            TensorKind::Grad(of) => self.layer_of(of),
            _ => 0,
        }
    }
}
