//! Autodiff (the backward ops) and the SGD update ops.

use super::{Graph, GraphError, Op, TensorId, TensorKind, MAX_TENSORS};

impl Graph {
    /// Autodiff: appends to `backward` the gradient of the loss with respect to every parameter,
    /// walking `forward` in reverse. A tensor's gradient is formed only where a parameter's
    /// gradient flows through it: never the input's, nor the patches of the input.
    pub fn differentiate(&mut self) -> Result<(), GraphError> {
        if !self.backward.is_empty()
            || !matches!(self.forward.last(), Some(Op::SoftmaxCrossEntropy { .. }))
        {
            return Err(GraphError::NotDifferentiable);
        }
        // depends[t]: t is computed from a parameter, so dloss/dt leads to its gradient.
        let mut depends = [false; MAX_TENSORS];
        for (t, info) in self.tensors.iter().enumerate() {
            depends[t] = info.is_param();
        }
        for op in &self.forward {
            let (ins, out) = forward_io(op);
            depends[out as usize] = ins.iter().flatten().any(|&t| depends[t as usize]);
        }
        // grad[t]: the tensor holding dloss/dt, once known.
        let mut grad = [None::<TensorId>; MAX_TENSORS];
        let forward = self.forward.clone();
        for op in forward.iter().rev() {
            if let Op::SoftmaxCrossEntropy { logits, labels, .. } = *op {
                let dlogits = self.grad_of(logits)?;
                self.push_backward(Op::SoftmaxCrossEntropyGrad { logits, labels, dlogits })?;
                grad[logits as usize] = Some(dlogits);
                continue;
            }
            let (_, out) = forward_io(op);
            if !depends[out as usize] {
                continue; // no parameter's gradient flows through it (the input's patches)
            }
            let dy = grad[out as usize].ok_or(GraphError::NotDifferentiable)?;
            match *op {
                Op::BiasAdd { x, b, .. } => {
                    let db = self.grad_of(b)?;
                    self.push_backward(Op::BiasGrad { dy, db })?;
                    grad[b as usize] = Some(db);
                    grad[x as usize] = Some(dy); // identity: the same tensor
                }
                Op::Dense { x, w, .. } => {
                    let dw = self.grad_of(w)?;
                    self.push_backward(Op::DenseGradWeight { x, dy, dw })?;
                    grad[w as usize] = Some(dw);
                    if depends[x as usize] {
                        let dx = self.grad_of(x)?;
                        self.push_backward(Op::DenseGradInput { dy, w, dx })?;
                        grad[x as usize] = Some(dx);
                    }
                }
                _ => {
                    let (ins, _) = forward_io(op);
                    let Some(x) = ins[0].filter(|&x| depends[x as usize]) else { continue };
                    let dx = self.grad_of(x)?;
                    self.push_backward(match *op {
                        Op::Relu { y, .. } => Op::ReluGrad { dy, y, dx },
                        Op::Im2col { geom, .. } => Op::Col2im { dy, dx, geom },
                        Op::Reshape { .. } => Op::Reshape { x: dy, y: dx },
                        Op::MaxPool { geom, .. } => Op::MaxPoolGrad { dy, x, dx, geom },
                        Op::AvgPool { geom, .. } => Op::AvgPoolGrad { dy, dx, geom },
                        _ => return Err(GraphError::NotDifferentiable),
                    })?;
                    grad[x as usize] = Some(dx);
                }
            }
        }
        Ok(())
    }

    /// Appends one SGD op per parameter (with a velocity buffer when `momentum > 0`).
    pub fn optimize(&mut self, sgd: super::Sgd) -> Result<(), GraphError> {
        if !sgd.lr.is_finite() || sgd.lr <= 0.0 {
            return Err(GraphError::Hyper { name: "learning rate (> 0)" });
        }
        if !sgd.momentum.is_finite() || !(0.0..1.0).contains(&sgd.momentum) {
            return Err(GraphError::Hyper { name: "momentum (0 <= m < 1)" });
        }
        if !sgd.weight_decay.is_finite() || sgd.weight_decay < 0.0 {
            return Err(GraphError::Hyper { name: "weight decay (>= 0)" });
        }
        let params = self.params.clone();
        for (w, b) in params {
            for param in [w, b] {
                let grad = self.gradient(param).ok_or(GraphError::NotDifferentiable)?;
                let velocity = if sgd.momentum > 0.0 {
                    let info = self.tensors[param as usize];
                    Some(self.tensor(TensorKind::Velocity(param), info.rows, info.cols)?)
                } else {
                    None
                };
                self.update
                    .push(Op::Sgd { param, grad, velocity })
                    .map_err(|_| GraphError::Capacity)?;
            }
        }
        self.sgd = Some(sgd);
        Ok(())
    }
}

/// A forward op's inputs (data input first) and its output.
fn forward_io(op: &Op) -> ([Option<TensorId>; 2], TensorId) {
    match *op {
        Op::Dense { x, w, y } | Op::BiasAdd { x, b: w, y } => ([Some(x), Some(w)], y),
        Op::Relu { x, y }
        | Op::Im2col { x, y, .. }
        | Op::Reshape { x, y }
        | Op::MaxPool { x, y, .. }
        | Op::AvgPool { x, y, .. } => ([Some(x), None], y),
        Op::SoftmaxCrossEntropy { logits, loss, .. } => ([Some(logits), None], loss),
        // Backward and update ops are never in `forward`.
        Op::SoftmaxCrossEntropyGrad { dlogits: y, .. }
        | Op::DenseGradInput { dx: y, .. }
        | Op::DenseGradWeight { dw: y, .. }
        | Op::BiasGrad { db: y, .. }
        | Op::ReluGrad { dx: y, .. }
        | Op::Sgd { param: y, .. }
        | Op::Col2im { dx: y, .. }
        | Op::MaxPoolGrad { dx: y, .. }
        | Op::AvgPoolGrad { dx: y, .. } => ([None, None], y),
    }
}
