//! The one training loop. Every trainer (the accelerator on any of its machines, the f32 CPU
//! reference, the GPU and the GPU's CPU twin) is a [`StepTrainer`]; [`train_curves`] steps them
//! through the same batches in lockstep, evaluates each on the test split after every epoch
//! (in passes of at most [`EVAL_ROWS`] rows) and stops on the first non-finite loss, naming the
//! trainer. `systole train` (one trainer, or the accelerator beside the reference), `--device
//! gpu` and `--compare` all run it; what they print is their [`Observer`]'s.

use anyhow::{anyhow, bail};
use serde::Serialize;
use systole_core::exec::{softmax_cross_entropy, BatchOutcome, Executor, Plain};
use systole_core::graph::{Graph, Sgd};
use systole_core::link::Traffic;
use systole_core::params::Params;
use systole_core::train::{AccelTrainer, Work};

use crate::gpu::check_batch;

mod beside;

pub use beside::Beside;

/// How [`StepTrainer::start_step`] left a step: done, or running beside the caller until
/// [`StepTrainer::finish_step`].
pub enum Started {
    Done(BatchOutcome),
    Pending,
}

/// Something that trains a graph one batch at a time: the GPU, its CPU twin, the f32 CPU
/// reference or the accelerator, so one loop runs them side by side on the same batches.
pub trait StepTrainer {
    /// For tables: "gpu f32 (NVIDIA H100)", "cpu f32 reference", ...
    fn label(&self) -> String;
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome>;
    /// Starts a step; a trainer that steps beside the caller (on a thread of its own, [`Beside`])
    /// returns [`Started::Pending`] and hands the outcome to [`StepTrainer::finish_step`]. By
    /// default the step is done here.
    fn start_step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<Started> {
        Ok(Started::Done(self.step(x, labels)?))
    }
    /// The outcome of the step [`StepTrainer::start_step`] left pending.
    fn finish_step(&mut self) -> anyhow::Result<BatchOutcome> {
        bail!("{}: no step is pending", self.label())
    }
    /// Loss and hits without training.
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome>;
    /// The accelerator's cycles and MACs over the training steps since the last call; `None`
    /// for a trainer that counts none.
    fn take_work(&mut self) -> Option<Work> {
        None
    }
    /// What the training steps since the last call sent and received over the host link;
    /// `None` for a trainer reached over none.
    fn take_link(&mut self) -> Option<Traffic> {
        None
    }
}

/// The f32 CPU reference executor, as a [`StepTrainer`].
pub struct CpuReference(pub Executor<Plain<f32>>);

impl CpuReference {
    pub fn new(graph: &Graph, params: &Params) -> CpuReference {
        CpuReference(Executor::new(graph.clone(), Plain::<f32>::new(), params))
    }
}

impl StepTrainer for CpuReference {
    fn label(&self) -> String {
        "cpu f32 reference".into()
    }
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        check_batch(&self.0.graph, x, labels)?;
        Ok(self.0.step(x, labels))
    }
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        check_batch(&self.0.graph, x, labels)?;
        Ok(self.0.forward(x, labels))
    }
}

/// BF16 training on a machine of the accelerator, as a [`StepTrainer`].
pub struct AccelStepTrainer {
    pub trainer: AccelTrainer,
    pub label: String,
    /// Work of the training steps since [`StepTrainer::take_work`] last took it.
    pub work: Work,
    /// The link traffic of the training steps since [`StepTrainer::take_link`] last took it.
    pub link: Traffic,
}

impl AccelStepTrainer {
    pub fn new(trainer: AccelTrainer, label: impl Into<String>) -> AccelStepTrainer {
        let (work, link) = (Work::default(), Traffic::default());
        AccelStepTrainer { trainer, label: label.into(), work, link }
    }
}

impl StepTrainer for AccelStepTrainer {
    fn label(&self) -> String {
        self.label.clone()
    }
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        check_batch(&self.trainer.graph, x, labels)?;
        let before = self.trainer.machine.link_traffic();
        let (outcome, work) =
            self.trainer.step(x, labels).map_err(|e| anyhow!("accelerator: {e}"))?;
        self.work += work;
        if let Some((after, before)) = self.trainer.machine.link_traffic().zip(before) {
            self.link += after - before;
        }
        Ok(outcome)
    }
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        check_batch(&self.trainer.graph, x, labels)?;
        let (logits, _) =
            self.trainer.logits(x, labels.len()).map_err(|e| anyhow!("accelerator: {e}"))?;
        let classes = self.trainer.graph.classes() as usize;
        Ok(softmax_cross_entropy(&logits, labels, classes).0)
    }
    fn take_work(&mut self) -> Option<Work> {
        Some(core::mem::take(&mut self.work))
    }
    fn take_link(&mut self) -> Option<Traffic> {
        let link = core::mem::take(&mut self.link);
        self.trainer.machine.link_traffic().map(|_| link)
    }
}

/// One epoch of a loss curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    pub epoch: u32,
    /// Mean training loss over the epoch's samples.
    pub loss: f64,
    pub train_accuracy: f64,
    pub test_accuracy: f64,
    /// The accelerator's cycles and MACs over the epoch's training steps.
    #[serde(skip)]
    pub work: Option<Work>,
    /// What the epoch's training steps sent and received over the host link, if any.
    #[serde(skip)]
    pub link: Option<Traffic>,
}

/// A training run's curve on one machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Curve {
    pub machine: String,
    pub points: Vec<CurvePoint>,
}

/// Rows per evaluation pass: a bound on an evaluation's DRAM on the accelerator and its
/// activations on the reference (each size gets its own compiled step or plan, so few sizes
/// is better).
pub const EVAL_ROWS: usize = 512;

/// The batches of each epoch, in the order every trainer takes them.
pub trait EpochBatches {
    /// Starts epoch `epoch` (from 1): how many batches it has.
    fn start(&mut self, epoch: u32) -> usize;
    /// Batch `b` of the epoch started last: its features (row-major) and labels.
    fn batch(&mut self, b: usize) -> (&[f32], &[u16]);
}

/// The same batches every epoch.
pub struct SameBatches(pub Vec<(Vec<f32>, Vec<u16>)>);

impl EpochBatches for SameBatches {
    fn start(&mut self, _epoch: u32) -> usize {
        self.0.len()
    }
    fn batch(&mut self, b: usize) -> (&[f32], &[u16]) {
        (&self.0[b].0, &self.0[b].1)
    }
}

/// What a run shows as it goes: told when an epoch starts (with its batch count), after each
/// batch has stepped every trainer, and when the epoch's points are in.
pub trait Observer {
    fn epoch_started(&mut self, _epoch: u32, _batches: usize) {}
    fn stepped(&mut self) {}
    fn epoch_done(&mut self, points: &[CurvePoint]) -> anyhow::Result<()>;
}

/// An [`Observer`] of epochs alone.
impl<F: FnMut(&[CurvePoint])> Observer for F {
    fn epoch_done(&mut self, points: &[CurvePoint]) -> anyhow::Result<()> {
        self(points);
        Ok(())
    }
}

/// Trains every trainer for `epochs` epochs in lockstep: each batch of the epoch goes to each
/// of them in turn; `test` is evaluated after each epoch, and `observer` sees the run as
/// it goes. A non-finite loss stops the run with an error naming the trainer.
pub fn train_curves<'t>(
    trainers: &mut [&mut (dyn StepTrainer + 't)],
    epochs: u32,
    batches: &mut dyn EpochBatches,
    test: (&[f32], &[u16]),
    sgd: &Sgd,
    observer: &mut dyn Observer,
) -> anyhow::Result<Vec<Curve>> {
    let mut curves: Vec<Curve> =
        trainers.iter().map(|t| Curve { machine: t.label(), points: Vec::new() }).collect();
    for epoch in 1..=epochs {
        let mut sums = vec![(0.0f64, 0u64, 0u64); trainers.len()];
        let count = batches.start(epoch);
        observer.epoch_started(epoch, count);
        for b in 0..count {
            let (x, y) = batches.batch(b);
            // The last trainers start first, so one stepping on its own thread (the reference,
            // last beside the accelerator) works while the others step here.
            let mut started = Vec::with_capacity(trainers.len());
            for t in trainers.iter_mut().rev() {
                started.push(t.start_step(x, y)?);
            }
            started.reverse();
            for ((t, sum), started) in trainers.iter_mut().zip(&mut sums).zip(started) {
                let o = match started {
                    Started::Done(o) => o,
                    Started::Pending => t.finish_step()?,
                };
                if !o.loss.is_finite() {
                    bail!(
                        "epoch {epoch}: the training loss of {} became {}: training diverged; {}",
                        t.label(),
                        o.loss,
                        divergence_advice(sgd)
                    );
                }
                sum.0 += o.loss * y.len() as f64;
                sum.1 += o.correct as u64;
                sum.2 += y.len() as u64;
            }
            observer.stepped();
        }
        let mut points = Vec::new();
        for ((t, sum), curve) in trainers.iter_mut().zip(&sums).zip(&mut curves) {
            let point = CurvePoint {
                epoch,
                loss: sum.0 / sum.2.max(1) as f64,
                train_accuracy: sum.1 as f64 / sum.2.max(1) as f64,
                work: t.take_work(),
                link: t.take_link(),
                test_accuracy: accuracy_of(&mut **t, test)?,
            };
            curve.points.push(point);
            points.push(point);
        }
        observer.epoch_done(&points)?;
    }
    Ok(curves)
}

/// Accuracy on `(features, labels)`, in passes of at most [`EVAL_ROWS`] rows.
pub fn accuracy_of(
    trainer: &mut dyn StepTrainer,
    (x, labels): (&[f32], &[u16]),
) -> anyhow::Result<f64> {
    if labels.is_empty() {
        return Ok(0.0);
    }
    let features = x.len() / labels.len();
    let mut correct = 0u64;
    for (xs, ys) in x.chunks(EVAL_ROWS * features).zip(labels.chunks(EVAL_ROWS)) {
        correct += trainer.evaluate(xs, ys)?.correct as u64;
    }
    Ok(correct as f64 / labels.len() as f64)
}

/// Two curves side by side, one line per epoch, with the relative gap of A's loss from B's.
pub fn side_by_side(a: &Curve, b: &Curve) -> String {
    let mut out = format!("A: {}\nB: {}\n", a.machine, b.machine);
    out += &format!(
        "{:>5}  {:>10} {:>9} {:>9}  {:>10} {:>9} {:>9}  {:>9}\n",
        "epoch", "A loss", "A train", "A test", "B loss", "B train", "B test", "loss gap"
    );
    for (p, q) in a.points.iter().zip(&b.points) {
        out += &format!(
            "{:>5}  {:>10.5} {:>8.2}% {:>8.2}%  {:>10.5} {:>8.2}% {:>8.2}%  {:>+8.2}%\n",
            p.epoch,
            p.loss,
            100.0 * p.train_accuracy,
            100.0 * p.test_accuracy,
            q.loss,
            100.0 * q.train_accuracy,
            100.0 * q.test_accuracy,
            100.0 * gap(p, q)
        );
    }
    out
}

/// Relative gap of `p`'s loss from `q`'s.
pub fn gap(p: &CurvePoint, q: &CurvePoint) -> f64 {
    (p.loss - q.loss) / q.loss
}

/// What to lower after a divergence. Each step adds `weight_decay * p` to a weight's gradient,
/// so with momentum `m` (the heavy ball of core's `sgd`) the decay alone is a quadratic of
/// curvature `wd` that SGD climbs out of once `lr * wd >= 2 * (1 + m)`, whatever the data: each
/// weight then swings across zero with a growing amplitude. Below that the decay still adds
/// `wd` to the curvature the learning rate has to stay under, so both flags are named.
pub fn divergence_advice(sgd: &Sgd) -> String {
    let Sgd { lr, momentum, weight_decay: wd } = *sgd;
    if wd == 0.0 {
        return format!("try a lower --lr (now {lr})");
    }
    let (product, limit) = (lr as f64 * wd as f64, 2.0 * (1.0 + momentum as f64));
    if product >= limit {
        format!(
            "--lr {lr} x --weight-decay {wd} = {} is at least 2 x (1 + --momentum {momentum}) = \
             {}, where weight decay alone grows every weight at every step: lower \
             --weight-decay below {} (at this --lr) or --lr below {}",
            short(product),
            short(limit),
            short(limit / lr as f64),
            short(limit / wd as f64)
        )
    } else {
        format!(
            "try a lower --lr (now {lr}) or --weight-decay (now {wd}): lr x weight decay = {} \
             (weight decay alone diverges from 2 x (1 + momentum) = {})",
            short(product),
            short(limit)
        )
    }
}

/// `x` to three significant digits, without trailing zeros: `76`, `3.8`, `0.38`.
fn short(x: f64) -> String {
    let decimals = (2 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A divergence caused by `--weight-decay` advised a lower `--lr` alone.
    #[test]
    fn divergence_advice_names_weight_decay_when_it_is_at_fault() {
        let advice =
            |lr, momentum, weight_decay| divergence_advice(&Sgd { lr, momentum, weight_decay });
        assert_eq!(advice(0.5, 0.9, 0.0), "try a lower --lr (now 0.5)");
        // lr x wd = 5 >= 2 x (1 + 0.9): the decay alone diverges.
        assert_eq!(
            advice(0.5, 0.9, 10.0),
            "--lr 0.5 x --weight-decay 10 = 5 is at least 2 x (1 + --momentum 0.9) = 3.8, where \
             weight decay alone grows every weight at every step: lower --weight-decay below 7.6 \
             (at this --lr) or --lr below 0.38"
        );
        // Without momentum the limit is 2.
        assert!(advice(0.1, 0.0, 20.0).starts_with("--lr 0.1 x --weight-decay 20 = 2 is at least"));
        // Below the limit the decay only contributes: both flags are named.
        assert_eq!(
            advice(0.05, 0.9, 1e-3),
            "try a lower --lr (now 0.05) or --weight-decay (now 0.001): lr x weight decay = \
             0.00005 (weight decay alone diverges from 2 x (1 + momentum) = 3.8)"
        );
        assert_eq!(
            (short(75.999), short(0.38), short(1234.6), short(2.0)),
            ("76".into(), "0.38".into(), "1235".into(), "2".into())
        );
    }

    /// The reference on its own thread trains the same bits as the reference here: the same
    /// curve through `train_curves` beside another trainer, and the same weights handed back.
    #[test]
    fn a_trainer_beside_trains_the_same_bits() {
        let net = crate::network::ModelChoice::Mlp.resolve(&[8], 4, 3).unwrap();
        let graph = Graph::network_training(&net, Sgd::DEFAULT).unwrap();
        let params = Params::init(&net, 3);
        let batch = |b: usize| -> (Vec<f32>, Vec<u16>) {
            let x = (0..16).map(|i| ((i * 7 + b * 5) % 11) as f32 / 11.0 - 0.5).collect();
            (x, (0..4).map(|i| ((i + b) % 3) as u16).collect())
        };
        let test = batch(9);
        let run = |beside: bool| {
            let mut batches = SameBatches((0..5).map(batch).collect());
            let mut here = CpuReference::new(&graph, &params);
            let mut other = Beside::new(CpuReference::new(&graph, &params));
            let mut plain = CpuReference::new(&graph, &params);
            let trainers: &mut [&mut dyn StepTrainer] = match beside {
                true => &mut [&mut here, &mut other],
                false => &mut [&mut here, &mut plain],
            };
            let test = (&test.0[..], &test.1[..]);
            let curves =
                train_curves(trainers, 3, &mut batches, test, &Sgd::DEFAULT, &mut |_: &[_]| {})
                    .unwrap();
            let trained = match beside {
                true => other.into_inner().unwrap().0.params(),
                false => plain.0.params(),
            };
            (curves[1].points.clone(), trained)
        };
        let (beside, alone) = (run(true), run(false));
        assert_eq!(beside.0, alone.0);
        assert_eq!(beside.1, alone.1);
        assert!(beside.0.iter().all(|p| p.loss.is_finite() && p.loss > 0.0), "{:?}", beside.0);
    }
}
