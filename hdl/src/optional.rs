//! A port or register that only some configs build.
//!
//! The weight-stationary PE and array hold the blocking schedule's `swap` under one config and
//! the decoupled schedule's weight-bank tags under the other. An absent part must leave no trace
//! in the Verilog, so that a blocking machine is emitted exactly as it was before the tags
//! existed (boards build it and must not grow), and a present one must keep its plain name
//! (`swap`, not the `swap$0` a one-element `Vec` would give).
//!
//! [`Optional`] is that part: a block named as its field when present, nothing when absent. Code
//! reaches the part through `Deref` (`self.swap.val()`, `self.tag.d.next = ...`), which panics
//! when it is absent: only the kernel of the config that builds it may touch it. An `hdl_gen`
//! kernel that serves both configs reaches it inside `for k in 0..self.part.len()`, which runs
//! (and emits) its body once or never.

use std::ops::{Deref, DerefMut};

use rust_hdl::prelude::*;

/// A block that exists in some configs only; see the module docs.
pub struct Optional<T>(Option<T>);

impl<T> Optional<T> {
    /// The part, built.
    pub fn some(part: T) -> Self {
        Optional(Some(part))
    }

    /// No part: nothing is emitted.
    pub fn none() -> Self {
        Optional(None)
    }

    /// `part()` when `present`, else nothing.
    pub fn when(present: bool, part: impl FnOnce() -> T) -> Self {
        Optional(present.then(part))
    }

    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// 1 when present, 0 when absent: the bound of a loop that touches it only if it exists.
    pub fn len(&self) -> usize {
        self.0.is_some() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl<T: Default> Optional<T> {
    /// A default part when `present`.
    pub fn default_when(present: bool) -> Self {
        Self::when(present, T::default)
    }
}

/// Absent: what a block's `Default` builds, its variants adding the part.
impl<T> Default for Optional<T> {
    fn default() -> Self {
        Optional::none()
    }
}

impl<T> Deref for Optional<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("this config does not build this part")
    }
}

impl<T> DerefMut for Optional<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("this config does not build this part")
    }
}

impl<T: Logic> Logic for Optional<T> {
    // The part's own update runs through `update_all`, as a `Vec`'s elements' do.
    fn update(&mut self) {}

    // `port.connect()` on an optional port reaches this, not the port's own `connect`: pass it on.
    fn connect(&mut self) {
        if let Some(part) = &mut self.0 {
            part.connect();
        }
    }
}

impl<T: Block> Block for Optional<T> {
    fn connect_all(&mut self) {
        if let Some(part) = &mut self.0 {
            part.connect_all();
        }
    }

    fn update_all(&mut self) {
        if let Some(part) = &mut self.0 {
            part.update_all();
        }
    }

    fn has_changed(&self) -> bool {
        self.0.as_ref().is_some_and(|part| part.has_changed())
    }

    fn accept(&self, name: &str, probe: &mut dyn Probe) {
        if let Some(part) = &self.0 {
            part.accept(name, probe);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::verilog_of;

    #[derive(LogicBlock)]
    struct Gate {
        a: Signal<In, Bit>,
        b: Optional<Signal<In, Bit>>,
        y: Signal<Out, Bit>,
    }

    impl Logic for Gate {
        #[hdl_gen]
        fn update(&mut self) {
            self.y.next = self.a.val();
            for _k in 0..self.b.len() {
                self.y.next = self.a.val() & self.b.val();
            }
        }
    }

    fn gate(with_b: bool) -> Gate {
        Gate { a: Default::default(), b: Optional::default_when(with_b), y: Default::default() }
    }

    /// Present, the part is a port under its own name; absent, it leaves no trace.
    #[test]
    fn an_absent_part_emits_nothing() {
        let with = verilog_of(gate(true));
        assert!(with.contains("module top(a,b,y);") && with.contains("y = a & b;"), "{with}");
        let without = verilog_of(gate(false));
        assert!(without.contains("module top(a,y);") && !without.contains(" b;"), "{without}");
        let mut g = gate(true);
        g.connect_all();
        g.a.next = true;
        g.b.next = false;
        crate::testing::settle(&mut g);
        assert!(!g.y.val());
    }
}
