//! A Raspberry Pi Pico runs one handwritten-digit inference on a Systole accelerator.
//!
//! SPI0 at 1 MHz, mode 0: GP18 SCK, GP19 MOSI, GP16 MISO, GP17 chip select (a plain output, so
//! the driver's `SpiDevice` owns it through embedded-hal-bus). docs/FIRMWARE.md has the wiring
//! to each FPGA board.
//!
//! 1. Wake: ask the accelerator what it is until it answers (the FPGA may still be loading its
//!    bitstream after power-up), every 100 ms for up to 10 s.
//! 2. Pick the digits blob compiled for that array (one per board default, built and checked by
//!    `firmware/tests/digits.rs`); the driver refuses a blob for another array anyway.
//! 3. Load the model, run the sample digit, log the predicted digit and the accelerator's cycle
//!    count over defmt (RTT: `cargo run --release` with a debug probe and probe-rs).
#![no_std]
#![no_main]

use defmt::{error, info, warn};
use defmt_rtt as _;
use embedded_hal::delay::DelayNs;
use embedded_hal::spi::MODE_0;
use embedded_hal_bus::spi::ExclusiveDevice;
use panic_probe as _;
use rp_pico::entry;
use rp_pico::hal::clocks::init_clocks_and_plls;
use rp_pico::hal::fugit::RateExtU32;
use rp_pico::hal::gpio::{FunctionSpi, PinState};
use rp_pico::hal::{pac, Clock, Sio, Spi, Timer, Watchdog};
use systole_firmware::{first_mismatch, Blob, Error, Identity, Input, Options, Systole};

/// The digits model (64-32-10, INT8) compiled for each board's default array.
const BLOBS: [&[u8]; 4] = [
    include_bytes!("../blobs/digits-icebreaker-int8.blob"),
    include_bytes!("../blobs/digits-alchitry-cu-int8.blob"),
    include_bytes!("../blobs/digits-ulx3s-25f-int8.blob"),
    include_bytes!("../blobs/digits-ulx3s-int8.blob"),
];

/// One held-out digit: 64 pixel counts (0 to 16, 8 x 8 row-major), then its label.
const SAMPLE: &[u8; 65] = include_bytes!("../blobs/sample.bin");

const WAKE_TRIES: u32 = 100;
const WAKE_DELAY_MS: u32 = 100;
const SPI_HZ: u32 = 1_000_000;

#[entry]
fn main() -> ! {
    let Some(mut pac) = pac::Peripherals::take() else { halt() };
    let mut watchdog = Watchdog::new(pac.WATCHDOG);
    let Ok(clocks) = init_clocks_and_plls(
        rp_pico::XOSC_CRYSTAL_FREQ,
        pac.XOSC,
        pac.CLOCKS,
        pac.PLL_SYS,
        pac.PLL_USB,
        &mut pac.RESETS,
        &mut watchdog,
    ) else {
        error!("clock setup failed");
        halt()
    };
    let sio = Sio::new(pac.SIO);
    let pins = rp_pico::Pins::new(pac.IO_BANK0, pac.PADS_BANK0, sio.gpio_bank0, &mut pac.RESETS);
    let sck = pins.gpio18.into_function::<FunctionSpi>();
    let mosi = pins.gpio19.into_function::<FunctionSpi>();
    let miso = pins.gpio16.into_function::<FunctionSpi>();
    let cs = pins.gpio17.into_push_pull_output_in_state(PinState::High);
    let bus = Spi::<_, _, _, 8>::new(pac.SPI0, (mosi, miso, sck)).init(
        &mut pac.RESETS,
        clocks.peripheral_clock.freq(),
        SPI_HZ.Hz(),
        MODE_0,
    );
    let mut timer = Timer::new(pac.TIMER, &mut pac.RESETS, &clocks);
    // Setting a GPIO output cannot fail on the RP2040 (its error type is `Infallible`).
    let Ok(spi) = ExclusiveDevice::new(bus, cs, timer);
    let mut accel = Systole::with_options(spi, timer, Options::DEFAULT);

    let Some(identity) = wake(&mut accel, &mut timer) else {
        error!(
            "no accelerator answered in {} ms: check the wiring and the bitstream",
            WAKE_TRIES * WAKE_DELAY_MS
        );
        halt()
    };
    info!(
        "accelerator: {}x{} {} array, ISA {}, {} DRAM bytes, FIFO of {}",
        identity.config.rows,
        identity.config.cols,
        identity.config.dtype.name(),
        identity.isa_version,
        identity.dram_bytes,
        identity.fifo_depth
    );
    let Some(blob) = BLOBS
        .iter()
        .filter_map(|bytes| Blob::parse(bytes).ok())
        .find(|blob| first_mismatch(&blob.target, &identity).is_none())
    else {
        error!("no digits blob was compiled for this array: rebuild one for it");
        halt()
    };

    let (pixels, label) = SAMPLE.split_at(64);
    let mut x = [0f32; 64];
    for (v, &p) in x.iter_mut().zip(pixels) {
        *v = p as f32 / blob.feature_scale;
    }
    let mut logits = [0f32; 10];
    match accel.run_inference(&blob, Input::F32(&x), &mut logits) {
        Ok(cycles) => {
            let digit = argmax(&logits);
            let us = cycles as f64 / blob.target.config.clock_mhz;
            info!("predicted digit {} (the sample is a {})", digit, label[0]);
            info!(
                "{} cycles ({} expected), {} us at {} MHz",
                cycles, blob.expected_cycles, us, blob.target.config.clock_mhz
            );
            info!("logits {}", logits);
        }
        Err(e) => error!("inference failed: {}", e),
    }
    halt()
}

/// Polls `Identify` until the accelerator answers; a failed attempt is most likely an FPGA
/// still configuring, whose pins float.
fn wake<S, D>(accel: &mut Systole<S, D>, timer: &mut Timer) -> Option<Identity>
where
    S: embedded_hal::spi::SpiDevice,
    D: DelayNs,
    Error<S::Error>: defmt::Format,
{
    for attempt in 0..WAKE_TRIES {
        match accel.read_identity().and_then(|id| accel.reset().map(|()| id)) {
            Ok(id) => return Some(id),
            Err(e) if attempt % 10 == 0 => warn!("waiting for the accelerator: {}", e),
            Err(_) => {}
        }
        timer.delay_ms(WAKE_DELAY_MS);
    }
    None
}

/// Index of the largest logit, the first on ties.
fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in logits.iter().enumerate() {
        if x > logits[best] {
            best = i;
        }
    }
    best
}

fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}
