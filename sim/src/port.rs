//! A top module's ports, as Verilator exposes them: what a model is built for and loaded with.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortDir {
    Input,
    Output,
}

/// One port of the top module, as Verilator exposes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Port {
    pub name: String,
    pub dir: PortDir,
    pub width: u32,
}

impl Port {
    pub fn input(name: &str, width: u32) -> Port {
        Port { name: name.into(), dir: PortDir::Input, width }
    }
    pub fn output(name: &str, width: u32) -> Port {
        Port { name: name.into(), dir: PortDir::Output, width }
    }
    /// 32-bit words this port's value takes.
    pub fn words(&self) -> usize {
        self.width.div_ceil(32) as usize
    }
}
