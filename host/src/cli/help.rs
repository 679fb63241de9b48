//! The help texts say what the commands do today: each names the features it serves.

use clap::CommandFactory;

/// The long help of `systole SUBCOMMAND...` (the top level for none).
fn help(path: &[&str]) -> String {
    let mut command = super::Cli::command();
    command.build();
    let mut at = &mut command;
    for name in path {
        at = at.find_subcommand_mut(name).unwrap_or_else(|| panic!("no subcommand {name}"));
    }
    at.render_long_help().to_string()
}

/// `text` holds every word of `wanted` (case-insensitive) and none of `stale`.
fn says(what: &str, text: &str, wanted: &[&str], stale: &[&str]) {
    let lower = text.to_lowercase();
    for word in wanted {
        assert!(lower.contains(&word.to_lowercase()), "{what} never says `{word}`:\n{text}");
    }
    for phrase in stale {
        assert!(!lower.contains(&phrase.to_lowercase()), "{what} still says `{phrase}`:\n{text}");
    }
}

#[test]
fn the_top_level_help_names_the_networks_train_takes() {
    says("systole --help", &help(&[]), &["LeNet", "conv", "MLP", "GPU"], &["an MLP classifier"]);
}

#[test]
fn train_help_names_its_data_sets_networks_and_dtypes() {
    says(
        "systole train --help",
        &help(&["train"]),
        &["mnist", "IDX", "lenet", "conv2d", "int8", "bf16", "decoupled", "nn.Conv2d"],
        &["pools in bf16 only", "(PyTorch nn.Linear layout)"],
    );
}

#[test]
fn bench_help_names_both_training_steps() {
    says(
        "systole bench --help",
        &help(&["bench"]),
        &["LeNet", "MLP", "GEMM"],
        &["the MLP training step,"],
    );
}

#[test]
fn predict_and_blob_help_name_every_data_set_kind() {
    for path in [&["predict"][..], &["firmware", "blob"]] {
        says(
            &format!("systole {} --help", path.join(" ")),
            &help(path),
            &["mnist", "IDX", "CSV"],
            &[],
        );
    }
}

#[test]
fn sim_and_gemm_help_say_the_decoupled_default() {
    for path in [&["sim"][..], &["gemm"]] {
        let text = help(path);
        says(&format!("systole {} --help", path.join(" ")), &text, &["[default: decoupled]"], &[]);
    }
}
