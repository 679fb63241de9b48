//! A loaded Verilated model: the only place this crate crosses into C++.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;

use crate::port::{Port, PortDir};
use crate::toolchain::SimError;

type New = unsafe extern "C" fn() -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Eval = unsafe extern "C" fn(*mut c_void);
type Set = unsafe extern "C" fn(*mut c_void, u32, *const u32) -> c_int;
type Get = unsafe extern "C" fn(*mut c_void, u32, *mut u32) -> c_int;
type TraceOpen = unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int;
type Tick = unsafe extern "C" fn(*mut c_void, u64);

/// One instance of a Verilated model.
pub struct Model {
    // Field order: the instance is freed (in Drop) before the library is unloaded.
    handle: *mut c_void,
    ports: Vec<Port>,
    free: Free,
    eval: Eval,
    set: Set,
    get: Get,
    trace_open: TraceOpen,
    trace_close: Free,
    tick: Tick,
    _lib: libloading::Library,
}

impl Model {
    /// Loads `lib` (built by [`crate::build_model`] for exactly these `ports`) and makes one
    /// instance.
    pub fn load(lib: &Path, ports: &[Port]) -> Result<Model, SimError> {
        let fail = |why: String| SimError::Load { path: lib.to_path_buf(), why };
        // SAFETY: the library is one this crate generated and built: its initialisers only set
        // up Verilator's runtime, and every symbol below has exactly the declared C signature
        // (see `build::shim_source`).
        unsafe {
            let library = libloading::Library::new(lib).map_err(|e| fail(e.to_string()))?;
            macro_rules! sym {
                ($name:literal, $ty:ty) => {
                    *library.get::<$ty>($name).map_err(|e| fail(e.to_string()))?
                };
            }
            let new: New = sym!(b"systole_sim_new\0", New);
            let model = Model {
                free: sym!(b"systole_sim_free\0", Free),
                eval: sym!(b"systole_sim_eval\0", Eval),
                set: sym!(b"systole_sim_set\0", Set),
                get: sym!(b"systole_sim_get\0", Get),
                trace_open: sym!(b"systole_sim_trace_open\0", TraceOpen),
                trace_close: sym!(b"systole_sim_trace_close\0", Free),
                tick: sym!(b"systole_sim_tick\0", Tick),
                handle: new(),
                ports: ports.to_vec(),
                _lib: library,
            };
            if model.handle.is_null() {
                return Err(fail("systole_sim_new returned null".into()));
            }
            Ok(model)
        }
    }

    /// Index of a port by name.
    pub fn port(&self, name: &str) -> Result<usize, SimError> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| SimError::Port { name: name.into(), why: "no such port".into() })
    }

    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// Drives an input port (bits above its width are dropped).
    pub fn set(&mut self, port: usize, value: &[u32]) -> Result<(), SimError> {
        let p = self.checked(port, value.len())?;
        if p.dir != PortDir::Input {
            return Err(SimError::Port { name: p.name.clone(), why: "is an output".into() });
        }
        // SAFETY: `handle` is live, `port` is an input index of this model, and `value` holds at
        // least the port's words (checked above).
        let rc = unsafe { (self.set)(self.handle, port as u32, value.as_ptr()) };
        self.rc(port, rc)
    }

    /// Drives an input port of at most 64 bits.
    pub fn set_u64(&mut self, port: usize, value: u64) -> Result<(), SimError> {
        self.set(port, &[value as u32, (value >> 32) as u32])
    }

    /// Reads any port into `out` (at least the port's words).
    pub fn get(&self, port: usize, out: &mut [u32]) -> Result<(), SimError> {
        self.checked(port, out.len())?;
        // SAFETY: as in `set`, with `out` large enough.
        let rc = unsafe { (self.get)(self.handle, port as u32, out.as_mut_ptr()) };
        self.rc(port, rc)
    }

    /// Reads a port of at most 64 bits.
    pub fn get_u64(&self, port: usize) -> Result<u64, SimError> {
        let mut w = [0u32; 2];
        self.get(port, &mut w)?;
        Ok(w[0] as u64 | (w[1] as u64) << 32)
    }

    /// Settles the combinational logic after inputs changed.
    pub fn eval(&mut self) {
        // SAFETY: `handle` is live.
        unsafe { (self.eval)(self.handle) }
    }

    /// `n` clock cycles (a falling then a rising edge of the `clock` port each).
    pub fn tick(&mut self, n: u64) {
        // SAFETY: `handle` is live.
        unsafe { (self.tick)(self.handle, n) }
    }

    /// Starts dumping every signal to a VCD file at `path`.
    pub fn trace(&mut self, path: &Path) -> Result<(), SimError> {
        let c = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| SimError::Load { path: path.into(), why: "path contains NUL".into() })?;
        // SAFETY: `handle` is live and `c` is a valid C string for the call's duration.
        let rc = unsafe { (self.trace_open)(self.handle, c.as_ptr()) };
        if rc == -2 {
            return Err(SimError::Load {
                path: path.into(),
                why: "this model was built without tracing (BuildOptions::trace)".into(),
            });
        }
        if rc != 0 {
            return Err(SimError::Load {
                path: path.into(),
                why: "cannot open the VCD file".into(),
            });
        }
        Ok(())
    }

    /// Stops dumping and closes the VCD file.
    pub fn close_trace(&mut self) {
        // SAFETY: `handle` is live.
        unsafe { (self.trace_close)(self.handle) }
    }

    fn checked(&self, port: usize, words: usize) -> Result<&Port, SimError> {
        let p = self.ports.get(port).ok_or_else(|| SimError::Port {
            name: format!("#{port}"),
            why: "no such port".into(),
        })?;
        if words < p.words() {
            return Err(SimError::Port {
                name: p.name.clone(),
                why: format!("needs {} words, got {words}", p.words()),
            });
        }
        Ok(p)
    }

    fn rc(&self, port: usize, rc: c_int) -> Result<(), SimError> {
        if rc == 0 {
            Ok(())
        } else {
            Err(SimError::Port {
                name: self.ports[port].name.clone(),
                why: "rejected by the shim".into(),
            })
        }
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("ports", &self.ports).finish_non_exhaustive()
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: `handle` came from `systole_sim_new` of this library and is freed once.
        unsafe { (self.free)(self.handle) }
    }
}
