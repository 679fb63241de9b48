//! `systole sim --netlist DIR`: a board build's synthesized netlist, cell by cell, as the
//! machine a program runs on: the LUTs, carries, flip-flops, block RAMs and DSPs Yosys mapped
//! the design to (what nextpnr placed and the bitstream holds), with Yosys' own models of the
//! cells, driven over the board's UART at its own divisor. It checks what the RTL's
//! simulation cannot: that synthesis kept the machine's bits and cycles (the DSPs instantiated
//! around Yosys' mapper, the memories it inferred, the logic ABC rewrote).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use systole_boards::board::Family;
use systole_boards::netlist::{machine_adapter, netlist_verilog, settle_cycles};
use systole_boards::wrapper::clock_source;
use systole_boards::yosys::share_dir;
use systole_boards::{Board, Report};
use systole_hdl::TopConfig;
use systole_sim::{BuildOptions, Port, RtlBuild};

/// A build's netlist, ready to be Verilated.
pub struct Netlist {
    pub board: Board,
    pub report: Report,
    /// The machine the build made, as its report records it.
    pub top: TopConfig,
    /// The netlist with a `systole_top` around the board's top.
    verilog: String,
    ports: Vec<Port>,
    /// Cells in the netlist (its LUTs, carries, flip-flops, memories, DSPs and PLL).
    pub cells: usize,
    /// Board clock cycles per machine cycle (a clock divided in logic), else 1.
    clock_ratio: u32,
    pub dir: PathBuf,
}

impl Netlist {
    /// Reads `dir` (what `systole board build` wrote): its `report.json` and `netlist.json`.
    pub fn load(dir: &Path) -> anyhow::Result<Netlist> {
        let report_path = dir.join("report.json");
        let json = std::fs::read_to_string(&report_path).map_err(|e| {
            anyhow!(
                "cannot read {}: {e}; give the directory `systole board build` wrote",
                report_path.display()
            )
        })?;
        let source = report_path.display().to_string();
        let report = Report::from_json(&json).map_err(|e| anyhow!("{source}: {e}"))?;
        let board = systole_boards::board::by_name(&report.board)
            .ok_or_else(|| anyhow!("{source}: unknown board `{}`", report.board))?;
        let Some(built) = report.built.clone() else {
            bail!("{source} does not say which accelerator was built (not a `systole board build` report)")
        };
        let config = built.array_config().map_err(|e| anyhow!("{source}: {e}"))?;
        let top = built.top(config);
        let clock_ratio = clock_source(&board, config.clock_mhz).ratio();
        let work = tempfile::tempdir().context("a scratch directory for Yosys")?;
        let netlist = netlist_verilog(&board, dir, work.path()).map_err(|e| anyhow!("{e}"))?;
        let cells = systole_sim::cells::instance_count(&netlist);
        // The ECP5 cells' models go in here; the iCE40's wherever Verilog is Verilated.
        let netlist = match board.family {
            Family::Ecp5 => {
                let share = share_dir(&board).map_err(|e| anyhow!("{e}"))?;
                systole_sim::cells::with_ecp5_models(&netlist, &share)
                    .map_err(|e| anyhow!("the netlist of {}: {e}", dir.display()))?
            }
            Family::Ice40 => netlist,
        };
        let (adapter, top_ports) = machine_adapter(&board);
        let ports = top_ports
            .iter()
            .map(|p| match p.input {
                true => Port::input(&p.name, p.bits as u32),
                false => Port::output(&p.name, p.bits as u32),
            })
            .collect();
        Ok(Netlist {
            board,
            report,
            top,
            cells,
            verilog: format!("{netlist}\n{adapter}"),
            ports,
            clock_ratio,
            dir: dir.to_path_buf(),
        })
    }

    /// Verilates it (or finds it in the cache).
    pub fn build(&self, opts: &BuildOptions) -> anyhow::Result<RtlBuild> {
        let reset = systole_boards::wrapper::PowerOnReset::for_top(&self.top);
        let settle = settle_cycles(self.clock_ratio, reset);
        RtlBuild::from_netlist(
            &self.top,
            &self.verilog,
            self.ports.clone(),
            self.clock_ratio,
            settle,
            opts,
        )
        .map_err(|e| anyhow!("the netlist of {}: {e}", self.dir.display()))
    }
}
