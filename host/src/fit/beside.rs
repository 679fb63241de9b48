//! A trainer on a thread of its own, so its steps run beside the other trainers' on another
//! core: [`train_curves`](super::train_curves) starts its step first and collects the outcome
//! after stepping the rest. Each trainer's arithmetic is unchanged, so are its bits.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use anyhow::anyhow;
use systole_core::exec::BatchOutcome;
use systole_core::train::Work;

use super::{Started, StepTrainer};

enum Request {
    Step(Vec<f32>, Vec<u16>),
    Evaluate(Vec<f32>, Vec<u16>),
    TakeWork,
}

enum Reply {
    Outcome(anyhow::Result<BatchOutcome>),
    Work(Option<Work>),
}

/// `T` stepped on its own thread; [`Beside::into_inner`] hands it back.
pub struct Beside<T: StepTrainer + Send + 'static> {
    label: String,
    requests: Option<Sender<Request>>,
    replies: Receiver<Reply>,
    thread: Option<JoinHandle<T>>,
}

impl<T: StepTrainer + Send + 'static> Beside<T> {
    pub fn new(mut trainer: T) -> Beside<T> {
        let label = trainer.label();
        let (requests, inbox) = channel::<Request>();
        let (outbox, replies) = channel::<Reply>();
        let thread = std::thread::spawn(move || {
            for request in inbox {
                let reply = match request {
                    Request::Step(x, labels) => Reply::Outcome(trainer.step(&x, &labels)),
                    Request::Evaluate(x, labels) => Reply::Outcome(trainer.evaluate(&x, &labels)),
                    Request::TakeWork => Reply::Work(trainer.take_work()),
                };
                if outbox.send(reply).is_err() {
                    break;
                }
            }
            trainer
        });
        Beside { label, requests: Some(requests), replies, thread: Some(thread) }
    }

    /// The trainer, once its thread has finished what it was asked.
    pub fn into_inner(mut self) -> anyhow::Result<T> {
        self.requests = None;
        let thread = self.thread.take().expect("the thread until into_inner");
        thread.join().map_err(|_| anyhow!("{}: its thread panicked", self.label))
    }

    fn send(&self, request: Request) -> anyhow::Result<()> {
        let requests = self.requests.as_ref().expect("requests until into_inner");
        requests.send(request).map_err(|_| anyhow!("{}: its thread has stopped", self.label))
    }

    fn outcome(&self) -> anyhow::Result<BatchOutcome> {
        match self.replies.recv() {
            Ok(Reply::Outcome(outcome)) => outcome,
            Ok(Reply::Work(_)) => Err(anyhow!("{}: a reply out of order", self.label)),
            Err(_) => Err(anyhow!("{}: its thread has stopped", self.label)),
        }
    }
}

impl<T: StepTrainer + Send + 'static> StepTrainer for Beside<T> {
    fn label(&self) -> String {
        self.label.clone()
    }
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        self.start_step(x, labels)?;
        self.finish_step()
    }
    fn start_step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<Started> {
        self.send(Request::Step(x.to_vec(), labels.to_vec()))?;
        Ok(Started::Pending)
    }
    fn finish_step(&mut self) -> anyhow::Result<BatchOutcome> {
        self.outcome()
    }
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        self.send(Request::Evaluate(x.to_vec(), labels.to_vec()))?;
        self.outcome()
    }
    fn take_work(&mut self) -> Option<Work> {
        self.send(Request::TakeWork).ok()?;
        match self.replies.recv() {
            Ok(Reply::Work(work)) => work,
            _ => None,
        }
    }
}

impl<T: StepTrainer + Send + 'static> Drop for Beside<T> {
    fn drop(&mut self) {
        // Closing the requests ends the thread's loop once it has done what it was asked.
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
