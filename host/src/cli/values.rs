//! The command line's names for the services' plain enums: clap's [`ValueEnum`] written out
//! here, so the services below stay free of clap and each list of variants lives once.

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::bench::Suite;
use crate::machines::MachineKind;
use crate::sim::HostLink;
use crate::train::Device;
use crate::train_dtype::TrainDtype;

impl ValueEnum for MachineKind {
    fn value_variants<'a>() -> &'a [Self] {
        &MachineKind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            MachineKind::Functional => "Instruction by instruction; cycles from the closed form",
            MachineKind::Cycle => "Cycle-accurate; cycles counted",
            MachineKind::Rtl => {
                "The emitted Verilog, Verilated, driven through its UART pins (built on first use)"
            }
            MachineKind::Board => "An FPGA board running the accelerator, over USB serial (--port)",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

impl ValueEnum for TrainDtype {
    fn value_variants<'a>() -> &'a [Self] {
        &TrainDtype::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ValueEnum for Device {
    fn value_variants<'a>() -> &'a [Self] {
        &Device::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Device::Accel => PossibleValue::new("accel")
                .help("A machine of the accelerator (with the f32 CPU reference beside it)"),
            Device::Gpu => PossibleValue::new("gpu").help(
                "A CUDA GPU (with the f32 CPU reference beside it); `--dtype f32|bf16` is the \
                 precision of its matrix products",
            ),
        })
    }
}

impl ValueEnum for HostLink {
    fn value_variants<'a>() -> &'a [Self] {
        &HostLink::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            HostLink::Uart => "uart",
            HostLink::Spi => "spi",
        }))
    }
}

impl ValueEnum for Suite {
    fn value_variants<'a>() -> &'a [Self] {
        &Suite::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}
