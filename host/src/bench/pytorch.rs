//! `systole bench --pytorch`: runs bench/pytorch_mlp.py (compiled into the binary, so it works
//! from any directory) when `python3 -c 'import torch'` works, and adds its figures as rows
//! beside the bench's own; otherwise says loudly that they are skipped.

use std::process::Command;

use serde::{Deserialize, Serialize};
use systole_core::graph::Graph;

use super::gemm::shapes;
use super::{Kind, Row, Suite};
use crate::gpu::plan::StepPlan;
use crate::gpu::GpuDtype;

/// The script, as shipped in bench/.
pub const SCRIPT: &str = include_str!("../../../bench/pytorch_mlp.py");

#[derive(Debug, Serialize)]
pub struct PytorchReport {
    pub asked: bool,
    pub ran: bool,
    /// Why it did not run, or how it failed.
    pub reason: Option<String>,
    pub torch: Option<String>,
    pub device: Option<String>,
}

impl PytorchReport {
    pub fn not_asked() -> PytorchReport {
        PytorchReport { asked: false, ran: false, reason: None, torch: None, device: None }
    }

    fn skipped(reason: String) -> PytorchReport {
        println!("SKIPPED: PyTorch rows: {reason}");
        PytorchReport { asked: true, ran: false, reason: Some(reason), torch: None, device: None }
    }
}

/// What the script prints.
#[derive(Debug, Deserialize)]
pub struct ScriptOutput {
    pub torch: String,
    pub device: String,
    pub mlp: Vec<MlpTiming>,
    /// The MLP's step captured as one CUDA graph (on a GPU only).
    #[serde(default)]
    pub mlp_graph: Vec<MlpTiming>,
    /// LeNet-5's step (`--network`), eager and as one CUDA graph.
    #[serde(default)]
    pub network: Vec<MlpTiming>,
    #[serde(default)]
    pub network_graph: Vec<MlpTiming>,
    pub matmul: Vec<MatmulTiming>,
}

#[derive(Debug, Deserialize)]
pub struct MlpTiming {
    pub batch: u32,
    pub ms: f64,
    pub reps: u32,
    pub first_loss: f64,
}

#[derive(Debug, Deserialize)]
pub struct MatmulTiming {
    pub m: u32,
    pub k: u32,
    pub n: u32,
    pub dtype: String,
    pub ms: f64,
    pub reps: u32,
}

fn one_line(s: &str) -> String {
    s.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("").to_string()
}

pub fn run(suite: Suite, sizes: &[u32], batches: &[u32], rows: &mut Vec<Row>) -> PytorchReport {
    match Command::new("python3").args(["-c", "import torch"]).output() {
        Err(e) => return PytorchReport::skipped(format!("no python3 ({e})")),
        Ok(out) if !out.status.success() => {
            return PytorchReport::skipped(format!(
                "`python3 -c 'import torch'` failed: {}",
                one_line(&String::from_utf8_lossy(&out.stderr))
            ))
        }
        Ok(_) => {}
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return PytorchReport::skipped(format!("no temporary directory for the script: {e}"))
        }
    };
    let script = dir.path().join("pytorch_mlp.py");
    if let Err(e) = std::fs::write(&script, SCRIPT) {
        return PytorchReport::skipped(format!("cannot write the script: {e}"));
    }
    let smallest = batches.iter().min();
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let batches = if matches!(suite, Suite::Gemm) { String::new() } else { list(batches) };
    let sizes = if matches!(suite, Suite::Train) { String::new() } else { list(sizes) };
    // LeNet's step at the smallest batch, as the train suite runs it.
    let lenet = match super::train_cnn::network() {
        Ok(net) => crate::net_file::net_json(&net).to_string(),
        Err(e) => return PytorchReport::skipped(e.to_string()),
    };
    let lenet_batches = match (suite, smallest) {
        (Suite::Gemm, _) | (_, None) => String::new(),
        (_, Some(b)) => b.to_string(),
    };
    println!(
        "running bench/pytorch_mlp.py --batches {batches} --sizes {sizes} --network LENET \
         --network-batches {lenet_batches}"
    );
    let out = match Command::new("python3")
        .arg(&script)
        .args(["--batches", &batches, "--sizes", &sizes, "--network", &lenet])
        .args(["--network-batches", &lenet_batches])
        .output()
    {
        Ok(out) => out,
        Err(e) => return PytorchReport::skipped(format!("python3 did not start: {e}")),
    };
    if !out.status.success() {
        return PytorchReport::skipped(format!(
            "bench/pytorch_mlp.py failed: {}",
            one_line(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    let parsed: ScriptOutput = match serde_json::from_slice(&out.stdout) {
        Ok(p) => p,
        Err(e) => {
            return PytorchReport::skipped(format!(
                "bench/pytorch_mlp.py printed something else than its JSON: {e}"
            ))
        }
    };
    add_rows(&parsed, rows);
    PytorchReport {
        asked: true,
        ran: true,
        reason: None,
        torch: Some(parsed.torch),
        device: Some(parsed.device),
    }
}

/// Puts each PyTorch figure after the rows of the same workload.
pub fn add_rows(out: &ScriptOutput, rows: &mut Vec<Row>) {
    let mlp = super::train::graph();
    let lenet = super::train_cnn::network()
        .ok()
        .and_then(|net| Graph::network_training(&net, systole_core::graph::Sgd::DEFAULT).ok());
    let mlp_name = |t: &MlpTiming| super::train::workload(t.batch);
    let lenet_name = |t: &MlpTiming| super::train_cnn::workload(t.batch);
    let mut steps = Vec::new();
    for (how, timings) in [("eager step", &out.mlp), ("CUDA graph step", &out.mlp_graph)] {
        steps.extend(timings.iter().map(|t| (&mlp, mlp_name(t), how, t)));
    }
    if let Some(g) = &lenet {
        for (how, timings) in
            [("eager step", &out.network), ("CUDA graph step", &out.network_graph)]
        {
            steps.extend(timings.iter().map(|t| (g, lenet_name(t), how, t)));
        }
    }
    let on = &out.device;
    for (graph, workload, how, t) in steps {
        let Ok(plan) = StepPlan::training(graph, t.batch as usize, GpuDtype::F32) else {
            continue;
        };
        let mut r = Row::new(
            "train",
            &workload,
            format!("pytorch {} {how} ({on})", out.torch),
            Kind::Measured,
            "f32",
            plan.macs(),
        )
        .timed(t.ms / 1e3, None)
        .moved(plan.bytes())
        .checked(match how {
            "eager step" => format!("first loss {:.4}", t.first_loss),
            _ => format!("loss {:.4} after its replays", t.first_loss),
        });
        r.batch = Some(t.batch);
        let ours = rows.iter().find(|o| {
            o.workload == workload
                && o.machine.starts_with("gpu step")
                && o.dtype == "f32"
                && o.kind == Kind::Measured
        });
        r.note = match ours.and_then(|o| o.seconds) {
            Some(s) if t.ms / 1e3 >= s => format!(
                "median of {}; the Systole CUDA-graph step is {:.2}x faster",
                t.reps,
                t.ms / 1e3 / s
            ),
            Some(s) => format!(
                "median of {}; the Systole CUDA-graph step takes {:.2}x its time",
                t.reps,
                s / (t.ms / 1e3)
            ),
            None => format!("median of {}", t.reps),
        };
        insert_after_workload(rows, r);
    }
    for t in &out.matmul {
        let shape =
            shapes(&[t.n]).into_iter().find(|(_, s)| s.m == t.m && s.k == t.k && s.n == t.n);
        let Some((_, shape)) = shape else { continue };
        let dtype = if t.dtype.contains("bfloat16") { "bf16" } else { "f32" };
        let es = if dtype == "bf16" { 2 } else { 4 };
        let (m, k, n) = (t.m as u64, t.k as u64, t.n as u64);
        let mut r = Row::new(
            "gemm",
            &format!("{}x{}x{}", t.m, t.k, t.n),
            format!("torch.matmul ({on})"),
            Kind::Measured,
            dtype,
            shape.macs(),
        )
        .timed(t.ms / 1e3, None)
        .moved(es * (m * k + k * n + m * n))
        .checked("-");
        (r.m, r.k, r.n) = (Some(t.m), Some(t.k), Some(t.n));
        let ours = rows.iter().find(|o| {
            o.workload == r.workload
                && o.machine.starts_with("gpu cuBLAS")
                && o.dtype == dtype
                && o.kind == Kind::Measured
        });
        r.note = match ours.and_then(|o| o.seconds) {
            Some(s) => format!(
                "median of {}; cuBLAS here reaches {:.0}% of it",
                t.reps,
                100.0 * t.ms / 1e3 / s
            ),
            None => format!("median of {}", t.reps),
        };
        insert_after_workload(rows, r);
    }
}

fn insert_after_workload(rows: &mut Vec<Row>, row: Row) {
    match rows.iter().rposition(|r| r.workload == row.workload) {
        Some(i) => rows.insert(i + 1, row),
        None => rows.push(row),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_output_becomes_rows_beside_ours() {
        let out: ScriptOutput = serde_json::from_str(
            r#"{"torch": "2.11.0", "device": "NVIDIA H100", "mlp": [{"batch": 64, "ms": 0.5, "reps": 200, "warmup": 20, "first_loss": 2.3}],
                "mlp_graph": [{"batch": 64, "ms": 0.05, "reps": 200, "warmup": 20, "first_loss": 2.2}],
                "network": [{"batch": 8, "ms": 2.0, "reps": 200, "warmup": 5, "first_loss": 2.3}],
                "matmul": [{"m": 64, "k": 64, "n": 64, "dtype": "bfloat16", "ms": 0.01, "reps": 50}]}"#,
        )
        .unwrap();
        let mut rows = vec![
            Row::new("gemm", "64x64x64", "gpu cuBLAS gemm", Kind::Measured, "bf16", 64 * 64 * 64)
                .timed(0.02e-3, None),
            Row::new("gemm", "128x128x128", "x", Kind::Model, "bf16", 1),
            Row::new(
                "train",
                "mlp 64-64-10 step, batch 64",
                "gpu step, one CUDA graph",
                Kind::Measured,
                "f32",
                1,
            )
            .timed(0.1e-3, None),
        ];
        add_rows(&out, &mut rows);
        assert_eq!(rows.len(), 7);
        assert_eq!(rows[1].machine, "torch.matmul (NVIDIA H100)");
        assert!(rows[1].note.contains("reaches 50%"), "{}", rows[1].note);
        assert_eq!(rows[4].machine, "pytorch 2.11.0 eager step (NVIDIA H100)");
        assert!(rows[4].note.contains("5.00x faster"), "{}", rows[4].note);
        assert_eq!(rows[5].machine, "pytorch 2.11.0 CUDA graph step (NVIDIA H100)");
        assert!(rows[5].note.contains("takes 2.00x its time"), "{}", rows[5].note);
        // LeNet's step has no GPU row of ours here: its own workload, no ratio.
        assert_eq!(rows[6].workload, "lenet step, batch 8");
        assert_eq!(rows[6].note, "median of 200");
    }

    #[test]
    fn the_script_is_shipped_whole() {
        for needle in ["def step_timing", "def graph_step_timing", "allow_tf32 = False"] {
            assert!(SCRIPT.contains(needle), "{needle}");
        }
    }
}
