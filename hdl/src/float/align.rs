//! The first stage of the f32 adder: its operands ordered and the smaller one aligned.

use rust_hdl::prelude::*;

/// The first half of [`F32Add`]: the operands read DAZ, ordered by magnitude, and the smaller
/// one's significand aligned to the larger one's.
///
/// Built compact ([`F32Align::default`]), the operands are compared (31 bits), swapped, and
/// the smaller one's significand shifted by the difference of the exponents they then have.
/// Built [`F32Align::parallel`] (the accumulator lanes', whose operands come straight from the
/// accumulators' block RAMs), the shift does not wait for the comparison: where the exponents
/// differ, the smaller magnitude is the operand with the smaller exponent (DAZ leaves every
/// exponent as it is), so both differences are formed at once, the one that is not negative is
/// the shift, and its operand's significand is shifted; where they are equal nothing is shifted
/// and the comparison picks the smaller significand at the end. Its longest path, an operand
/// into the aligned significand, is then an 8-bit subtraction, the shifter and the sticky bit,
/// beside the comparison rather than after it, in more logic (docs/DECISIONS.md 103). Both
/// give the same bits.
#[derive(LogicBlock)]
pub struct F32Align {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    /// The operand of larger magnitude, DAZ.
    pub x: Signal<Out, Bits<32>>,
    /// The smaller one's significand aligned: hidden bit at 26 less the exponent difference,
    /// guard, round and sticky at 2, 1, 0 (bit 27 zero).
    pub mz: Signal<Out, Bits<28>>,
    /// The smaller operand's sign (bit 2), whether its exponent field is all ones (bit 1), and
    /// whether its fraction is non-zero (bit 0): what the sum's sign and the infinities and
    /// NaNs need of it.
    pub z_flags: Signal<Out, Bits<3>>,
    /// Built to shift beside the comparison rather than after it.
    parallel: Constant<Bit>,
    a_d: Signal<Local, Bits<32>>,
    b_d: Signal<Local, Bits<32>>,
    /// The operand of smaller magnitude, DAZ.
    z: Signal<Local, Bits<32>>,
    ex: Signal<Local, Bits<8>>,
    ez: Signal<Local, Bits<8>>,
    /// The smaller magnitude's significand (hidden bit and fraction).
    z_sig: Signal<Local, Bits<24>>,
    ea: Signal<Local, Bits<8>>,
    eb: Signal<Local, Bits<8>>,
    /// `a`'s exponent is below `b`'s.
    a_below: Signal<Local, Bit>,
    /// The exponents' difference both ways.
    d_ab: Signal<Local, Bits<8>>,
    d_ba: Signal<Local, Bits<8>>,
    /// The shift, and the significand shifted: the smaller magnitude's (compact), or the
    /// smaller exponent's, `b`'s when they are equal (parallel).
    d: Signal<Local, Bits<8>>,
    sig: Signal<Local, Bits<24>>,
    /// That significand at bits 50..27, shifted right by `d` (below 27): bits 50..24 are its
    /// aligned 27 bits, bits 23..0 what the sticky bit holds.
    wide: Signal<Local, Bits<51>>,
}

impl F32Align {
    /// The aligner whose shift does not wait for the operands' comparison.
    pub fn parallel() -> F32Align {
        Self::build(true)
    }

    fn build(parallel: bool) -> F32Align {
        F32Align {
            a: Default::default(),
            b: Default::default(),
            x: Default::default(),
            mz: Default::default(),
            z_flags: Default::default(),
            parallel: Constant::new(parallel),
            a_d: Default::default(),
            b_d: Default::default(),
            z: Default::default(),
            ex: Default::default(),
            ez: Default::default(),
            z_sig: Default::default(),
            ea: Default::default(),
            eb: Default::default(),
            a_below: Default::default(),
            d_ab: Default::default(),
            d_ba: Default::default(),
            d: Default::default(),
            sig: Default::default(),
            wide: Default::default(),
        }
    }
}

/// The compact aligner.
impl Default for F32Align {
    fn default() -> Self {
        Self::build(false)
    }
}

impl Logic for F32Align {
    #[hdl_gen]
    fn update(&mut self) {
        // Denormals (and -0) are zero.
        self.a_d.next = self.a.val();
        if !self.a.val().get_bits::<8>(23).any() {
            self.a_d.next = 0.into();
        }
        self.b_d.next = self.b.val();
        if !self.b.val().get_bits::<8>(23).any() {
            self.b_d.next = 0.into();
        }
        // x: the operand of larger magnitude; z the other.
        self.x.next = self.a_d.val();
        self.z.next = self.b_d.val();
        if self.a_d.val().get_bits::<31>(0) < self.b_d.val().get_bits::<31>(0) {
            self.x.next = self.b_d.val();
            self.z.next = self.a_d.val();
        }
        self.ex.next = self.x.val().get_bits::<8>(23);
        self.ez.next = self.z.val().get_bits::<8>(23);
        self.z_sig.next = bit_cast::<24, 23>(self.z.val().get_bits::<23>(0))
            | (bit_cast::<24, 1>(self.ez.val().any().into()) << 23);
        self.ea.next = self.a.val().get_bits::<8>(23);
        self.eb.next = self.b.val().get_bits::<8>(23);
        self.a_below.next = self.ea.val() < self.eb.val();
        self.d_ab.next = self.ea.val() - self.eb.val();
        self.d_ba.next = self.eb.val() - self.ea.val();
        self.d.next = self.ex.val() - self.ez.val();
        self.sig.next = self.z_sig.val();
        if self.parallel.val() {
            self.d.next = self.d_ab.val();
            self.sig.next = bit_cast::<24, 23>(self.b_d.val().get_bits::<23>(0))
                | (bit_cast::<24, 1>(self.eb.val().any().into()) << 23);
            if self.a_below.val() {
                self.d.next = self.d_ba.val();
                self.sig.next = bit_cast::<24, 23>(self.a_d.val().get_bits::<23>(0))
                    | (bit_cast::<24, 1>(self.ea.val().any().into()) << 23);
            }
        }
        self.wide.next =
            (bit_cast::<51, 24>(self.sig.val()) << 27) >> self.d.val().get_bits::<5>(0);
        self.mz.next = bit_cast::<28, 27>(self.wide.val().get_bits::<27>(24))
            | bit_cast::<28, 1>(self.wide.val().get_bits::<24>(0).any().into());
        if self.d.val() >= 27 {
            // Every bit is past the sticky bit.
            self.mz.next = bit_cast::<28, 1>(self.sig.val().get_bit(23).into());
        }
        if self.parallel.val() && (self.ea.val() == self.eb.val()) {
            // Nothing shifts; the smaller significand is the comparison's.
            self.mz.next = bit_cast::<28, 24>(self.z_sig.val()) << 3;
        }
        self.z_flags.next = (bit_cast::<3, 1>(self.z.val().get_bits::<1>(31)) << 2)
            | (bit_cast::<3, 1>(self.ez.val().all().into()) << 1)
            | bit_cast::<3, 1>(self.z.val().get_bits::<23>(0).any().into());
    }
}
