use super::*;

fn spec(hidden: &[u32]) -> MlpSpec {
    MlpSpec { inputs: 64, hidden: Vec::from_slice(hidden).unwrap(), classes: 10 }
}

#[test]
fn autodiff_of_a_two_layer_mlp() {
    let g =
        Graph::training(&spec(&[32]), Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 }).unwrap();
    assert_eq!(g.forward.len(), 6); // dense, bias, relu, dense, bias, loss
    let kinds: Vec<&str, 16> = g
        .backward
        .iter()
        .map(|op| match op {
            Op::SoftmaxCrossEntropyGrad { .. } => "xent",
            Op::BiasGrad { .. } => "db",
            Op::DenseGradWeight { .. } => "dw",
            Op::DenseGradInput { .. } => "dx",
            Op::ReluGrad { .. } => "relu'",
            _ => "?",
        })
        .collect();
    assert_eq!(&kinds[..], &["xent", "db", "dw", "dx", "relu'", "db", "dw"]);
    assert_eq!(g.update.len(), 4);
    assert!(g.update.iter().all(|op| matches!(op, Op::Sgd { velocity: Some(_), .. })));
    assert_eq!(spec(&[32]).parameter_count(), 64 * 32 + 32 + 32 * 10 + 10);
}

#[test]
fn bad_specs_are_named() {
    assert_eq!(Graph::mlp(&spec(&[0])).unwrap_err(), GraphError::Width { layer: 1, width: 0 });
    let one = MlpSpec { classes: 1, ..spec(&[]) };
    assert_eq!(Graph::mlp(&one).unwrap_err(), GraphError::Classes { classes: 1 });
    let sgd = Sgd { lr: f32::NAN, momentum: 0.0, weight_decay: 0.0 };
    assert!(matches!(Graph::training(&spec(&[8]), sgd), Err(GraphError::Hyper { .. })));
}
