//! Autodiff against central differences of the loss: the one gradient check the MLP and the
//! convolutional graphs' tests share.

use systole_core::exec::{Executor, Plain};
use systole_core::graph::Graph;
use systole_core::params::Params;

/// Every parameter's gradient from autodiff on `x`, `y` against `(loss(p + h) - loss(p - h)) /
/// 2h`, each within `1e-7 + 1e-5 |numeric|`; returns how many elements were checked.
pub fn check_gradients(graph: &Graph, params: &Params, x: &[f64], y: &[u16]) -> u64 {
    let mut ex = Executor::new(graph.clone(), Plain::<f64>::new(), params);
    ex.forward(x, y);
    ex.backward(y);
    let h = 1e-6;
    let mut checked = 0;
    for &(w, b) in &graph.params {
        for param in [w, b] {
            let grad = ex.values[graph.gradient(param).unwrap() as usize].clone();
            for (i, &analytic) in grad.iter().enumerate() {
                let mut probe = Executor::new(graph.clone(), Plain::<f64>::new(), params);
                probe.values[param as usize][i] += h;
                let up = probe.forward(x, y).loss;
                probe.values[param as usize][i] -= 2.0 * h;
                let down = probe.forward(x, y).loss;
                let numeric = (up - down) / (2.0 * h);
                assert!(
                    (numeric - analytic).abs() <= 1e-7 + 1e-5 * numeric.abs(),
                    "tensor {param} element {i}: autodiff {analytic} vs finite difference {numeric}"
                );
                checked += 1;
            }
        }
    }
    checked
}
