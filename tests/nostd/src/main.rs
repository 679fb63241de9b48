//! A `#![no_std] #![no_main]` artifact that links systole-core without std and without a heap.
#![no_std]
#![no_main]

use core::hint::black_box;
use core::panic::PanicInfo;
use systole_core::isa::{decode, encode};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Bf16, Dtype, Requant};

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    loop {}
}

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let config = ArrayConfig::new(8, 8, Dtype::Int8);
    let shape = GemmShape { m: black_box(64), k: 64, n: 64 };
    let mut checksum = 0u64;
    if let Ok((layout, _)) = GemmLayout::packed(&config, &shape) {
        if let Ok(plan) = GemmPlan::new(&config, shape, layout) {
            checksum = plan.cycles();
            plan.emit(&mut |ins| {
                if let Ok(word) = encode(&ins) {
                    if decode(word) == Ok(ins) {
                        checksum = checksum.wrapping_add(word.0 as u64);
                    }
                }
            });
        }
    }
    let q = Requant::from_scale(0.01, 3).map(|r| r.apply(black_box(1234)) as u64).unwrap_or(0);
    black_box(checksum + q + Bf16::from_f32(black_box(1.5)).0 as u64);
    loop {}
}
