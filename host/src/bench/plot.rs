//! `--plot`: one SVG with two charts. Left, GEMM throughput against size (square `N^3`
//! shapes), one line per machine. Right, a roofline: attainable MAC/s against arithmetic
//! intensity (MACs per byte moved) for the accelerator config and the projected array, and on a
//! board for its SDRAM and its host link, with every GEMM row that moved bytes as a point.

use std::collections::BTreeMap;

use plotters::backend::SVGBackend;
use plotters::prelude::*;

use super::{dram_bandwidth, peak_of, Bench, Kind, Report, Row};

const SIZE: (u32, u32) = (1400, 560);

/// Rows with a rate, grouped by machine, in first-seen order.
fn series(rows: &[Row], keep: impl Fn(&Row) -> bool) -> Vec<(String, Vec<&Row>)> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.macs_per_s.is_some() && keep(r)) {
        let key = format!("{} ({})", r.machine, r.dtype);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    order
        .into_iter()
        .map(|k| {
            let v = groups.remove(&k).unwrap_or_default();
            (k, v)
        })
        .collect()
}

/// `[lo, hi]` widened to whole decades, for a log axis.
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    (10f64.powf(lo.log10().floor()), 10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)))
}

pub fn svg(report: &Report, bench: &Bench) -> Result<String, String> {
    let mut out = String::new();
    draw(&mut out, report, bench).map_err(|e| e.to_string())?;
    Ok(out)
}

fn draw(
    out: &mut String,
    report: &Report,
    bench: &Bench,
) -> Result<(), Box<dyn std::error::Error>> {
    // One colour per machine, the same in both charts.
    let mut machines: Vec<String> = Vec::new();
    for (name, _) in series(&report.rows, |_| true) {
        machines.push(name);
    }
    let color_of = |name: &str| {
        let i = machines.iter().position(|m| m == name).unwrap_or(machines.len());
        Palette99::pick(i).to_rgba()
    };
    let accel_key =
        |c: &systole_core::ArrayConfig| format!("{} ({})", super::accel_label(c), c.dtype.name());
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(SIZE.0 / 2);
    let gemm: Vec<Row> = report.rows.iter().filter(|r| r.suite == "gemm").cloned().collect();

    // Throughput against size, square shapes.
    let square = |r: &Row| r.m == r.k && r.k == r.n && r.m.is_some();
    let lines = series(&gemm, square);
    let (x_lo, x_hi) =
        decades(gemm.iter().filter(|r| square(r)).filter_map(|r| r.n.map(f64::from)));
    let (y_lo, y_hi) =
        decades(lines.iter().flat_map(|(_, rs)| rs.iter().filter_map(|r| r.macs_per_s)));
    let mut chart = ChartBuilder::on(&left)
        .caption("GEMM N x N x N: throughput", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("N")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("MAC/s")
        .y_label_formatter(&|y| super::si(*y).trim_end().to_string())
        .draw()?;
    for (name, rs) in &lines {
        let color = color_of(name);
        let mut pts: Vec<(f64, f64)> =
            rs.iter().filter_map(|r| Some((r.n? as f64, r.macs_per_s?))).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let style = if rs[0].kind == Kind::Projected {
            color.stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        chart.draw_series(LineSeries::new(pts.clone(), style))?.label(name.clone()).legend(
            move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)),
        );
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .draw()?;

    // Roofline.
    let projected_key = format!(
        "projected {}x{} @ {} MHz ({})",
        bench.projected.rows,
        bench.projected.cols,
        bench.projected.clock_mhz,
        bench.projected.dtype.name()
    );
    let mut roofs = vec![
        (accel_key(&bench.config), peak_of(&bench.config), dram_bandwidth(&bench.config)),
        (projected_key, peak_of(&bench.projected), dram_bandwidth(&bench.projected)),
    ];
    // A board's: its SDRAM, where it carries one, and its link as built and on the fast link,
    // 10 bits a byte (the end-to-end rows' bytes are the link's).
    if let Some(memory) = bench.board {
        let peak = peak_of(&bench.config);
        if memory.on_sdram().is_some() {
            let c = bench.config.with_dram_port(systole_core::DramPort::Sdram);
            roofs.push((accel_key(&c), peak, dram_bandwidth(&c)));
        }
        let dtype = bench.config.dtype.name();
        for link in [Some(memory), memory.rebuilt(), memory.on_sdram()].into_iter().flatten() {
            roofs.push((format!("{} ({dtype})", link.label()), peak, link.baud / 10.0));
        }
    }
    let points = series(&gemm, |r| r.macs_per_byte.is_some());
    let (i_lo, i_hi) = decades(
        points
            .iter()
            .flat_map(|(_, rs)| rs.iter().filter_map(|r| r.macs_per_byte))
            .chain(roofs.iter().map(|r| r.1 / r.2)),
    );
    let (p_lo, p_hi) = decades(
        points
            .iter()
            .flat_map(|(_, rs)| rs.iter().filter_map(|r| r.macs_per_s))
            .chain(roofs.iter().map(|r| r.1)),
    );
    let mut chart = ChartBuilder::on(&right)
        .caption("Roofline (GEMMs)", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((i_lo..i_hi).log_scale(), (p_lo..p_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("MACs per byte moved")
        .x_label_formatter(&|x| format!("{x}"))
        .y_desc("MAC/s")
        .y_label_formatter(&|y| super::si(*y).trim_end().to_string())
        .draw()?;
    for (name, peak, bw) in &roofs {
        let steps = 64;
        let pts: Vec<(f64, f64)> = (0..=steps)
            .map(|s| {
                let x = i_lo * (i_hi / i_lo).powf(s as f64 / steps as f64);
                (x, peak.min(x * bw))
            })
            .collect();
        let color = color_of(name);
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(1)))?
            .label(format!("roof of {name}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(1))
            });
    }
    for (name, rs) in &points {
        let color = color_of(name);
        chart
            .draw_series(rs.iter().filter_map(|r| {
                Some(Circle::new((r.macs_per_byte?, r.macs_per_s?), 4, color.filled()))
            }))?
            .label(name.clone())
            .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_cover_whole_decades() {
        assert_eq!(decades([3.0, 450.0].into_iter()), (1.0, 1000.0));
        assert_eq!(decades([10.0].into_iter()), (10.0, 100.0));
        assert_eq!(decades(std::iter::empty()), (1.0, 10.0));
        assert_eq!(decades([f64::NAN, 0.0, 5.0].into_iter()), (1.0, 10.0));
    }
}
