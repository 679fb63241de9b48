//! Flags a run was given that do not apply to it: said in one line on stderr (`note: ...`), not
//! dropped silently. A flag counts as given when its value differs from its default, which is
//! read from clap's own parse of an empty command line, so no default is written twice.

use clap::Parser;

use super::{ArrayArgs, GemmArgs, LinkArgs, TrainArgs};
use crate::machines::MachineKind;
use crate::network::ModelChoice;
use crate::train::Device;
use crate::train_dtype::TrainDtype;

/// The defaults of the shared flag groups, as clap fills them in.
#[derive(Parser)]
struct Defaults {
    #[command(flatten)]
    link: LinkArgs,
    #[command(flatten)]
    array: ArrayArgs,
    #[arg(long, value_delimiter = ',', default_value = "64")]
    hidden: Vec<u32>,
}

fn defaults() -> Defaults {
    Defaults::try_parse_from(["systole"]).expect("every flag of these groups has a default")
}

/// The one line naming every flag in `ignored` (each `flag (why)`), or `None` if none is.
pub fn note(ignored: &[String]) -> Option<String> {
    (!ignored.is_empty()).then(|| format!("note: ignored: {}", ignored.join("; ")))
}

impl LinkArgs {
    /// The link flags that `machine` does not use.
    pub fn ignored_on(&self, machine: MachineKind) -> Vec<String> {
        let d = defaults().link;
        let mut out = Vec::new();
        if machine != MachineKind::Board {
            if let Some(port) = &self.port {
                out.push(format!("--port {port} (only --machine board talks to a port)"));
            }
            if self.baud != d.baud {
                out.push(format!("--baud {} (only --machine board has a UART)", self.baud));
            }
        }
        if machine != MachineKind::Rtl {
            if let Some(n) = self.threads {
                out.push(format!("--threads {n} (only --machine rtl is Verilated)"));
            }
        }
        out
    }
}

impl ArrayArgs {
    /// Whether any array flag was given.
    fn given(&self) -> bool {
        let d = defaults().array;
        let dtype = systole_core::Dtype::Bf16;
        self.config(dtype) != d.config(dtype)
    }
}

impl TrainArgs {
    /// The flags this run does not use.
    pub fn ignored(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.hidden != defaults().hidden && self.model != ModelChoice::Mlp {
            let hidden: Vec<String> = self.hidden.iter().map(u32::to_string).collect();
            out.push(format!(
                "--hidden {} (--model {} has its own layers)",
                hidden.join(","),
                self.model
            ));
        }
        let accelerator =
            self.compare || (self.device == Device::Accel && self.dtype != TrainDtype::F32);
        let why = match self.device {
            Device::Gpu => "--device gpu trains on the GPU",
            Device::Accel => "--dtype f32 trains the f32 CPU reference alone",
        };
        if !accelerator {
            if self.machine != MachineKind::Functional {
                out.push(format!("--machine {} ({why})", self.machine.name()));
            }
            if self.array.given() {
                out.push(format!("the array flags ({why})"));
            }
        }
        let machine = if accelerator { self.machine } else { MachineKind::Functional };
        out.extend(self.link.ignored_on(machine));
        out
    }
}

impl GemmArgs {
    /// The flags this run does not use.
    pub fn ignored(&self) -> Vec<String> {
        self.link.ignored_on(self.machine)
    }
}
