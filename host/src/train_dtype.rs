//! The precision `systole train` trains in (`--dtype`), and a saved model records.

/// What a run trains in: BF16 on the accelerator, BF16 then INT8 inference, or f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainDtype {
    Bf16,
    Int8,
    F32,
}

impl TrainDtype {
    pub const ALL: [TrainDtype; 3] = [TrainDtype::Bf16, TrainDtype::Int8, TrainDtype::F32];

    pub fn name(self) -> &'static str {
        match self {
            TrainDtype::Bf16 => "bf16",
            TrainDtype::Int8 => "int8",
            TrainDtype::F32 => "f32",
        }
    }
}
