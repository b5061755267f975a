//! Tables (Markdown, printed and saved) and bar charts (PNG) of results.

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn markdown(&self) -> String {
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        let mut s = line(&self.header);
        s += &line(&self.header.iter().map(|_| "---".to_string()).collect::<Vec<_>>());
        for r in &self.rows {
            s += &line(r);
        }
        s
    }
}

/// "1234.5" with the precision a reader needs; "-" for missing values.
pub fn num(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.decimals$}")
    }
}

pub fn register_font() -> Result<()> {
    let bytes =
        std::fs::read(FONT).map_err(|e| anyhow!("{FONT}: {e} (make deps installs fonts-dejavu-core)"))?;
    // plotters keeps the font for the process's lifetime.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{FONT}: not a usable font"))
}

/// Prints `md`, then writes it as `<stem>.md` under `out` with a bar chart
/// of `bars` as `<stem>.png` (wall ns added per operation).
pub fn write_report(out: &Path, stem: &str, md: &str, title: &str, bars: &[(String, f64)]) -> Result<()> {
    println!("{md}");
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join(format!("{stem}.md")), md)?;
    bar_chart(&out.join(format!("{stem}.png")), title, "ns per operation", bars, None)?;
    eprintln!("harrier-bench: wrote {}/{stem}.md and {stem}.png", out.display());
    Ok(())
}

/// A horizontal bar per (label, value), with an optional target line.
pub fn bar_chart(
    path: &Path,
    title: &str,
    unit: &str,
    bars: &[(String, f64)],
    target: Option<f64>,
) -> Result<()> {
    register_font()?;
    let n = bars.iter().filter(|(_, v)| v.is_finite()).count();
    let root = BitMapBackend::new(path, (1100, 120 + 40 * n as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    draw_bars(&root, title, unit, bars, target)?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Several bar charts stacked in one PNG: (title, unit, bars) each.
pub fn bar_panels(path: &Path, title: &str, panels: &[(String, String, Vec<(String, f64)>)]) -> Result<()> {
    register_font()?;
    let heights: Vec<u32> =
        panels.iter().map(|p| 120 + 40 * p.2.iter().filter(|(_, v)| v.is_finite()).count() as u32).collect();
    let root = BitMapBackend::new(path, (1100, 50 + heights.iter().sum::<u32>())).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut area = root.titled(title, ("sans-serif", 28)).map_err(|e| anyhow!("{e}"))?;
    for (p, h) in panels.iter().zip(&heights) {
        let (top, rest) = area.split_vertically(*h);
        draw_bars(&top, &p.0, &p.1, &p.2, None)?;
        area = rest;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

fn draw_bars(
    root: &DrawingArea<BitMapBackend, plotters::coord::Shift>,
    title: &str,
    unit: &str,
    bars: &[(String, f64)],
    target: Option<f64>,
) -> Result<()> {
    let bars: Vec<_> = bars.iter().filter(|(_, v)| v.is_finite()).cloned().collect();
    let max = bars.iter().map(|b| b.1).chain(target).fold(0.0, f64::max) * 1.15;
    // A negative value (a change within the noise) gets room left of zero.
    let min = bars.iter().map(|b| b.1).fold(0.0, f64::min) * 1.15;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(420)
        .build_cartesian_2d(min..max.max(1.0), (0..bars.len()).into_segmented())
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(unit)
        // Every bar's label (plotters shows at most 10 by default).
        .y_labels(2 * bars.len() + 2)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => bars.get(*i).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let (lo, hi) = (SegmentValue::Exact(i), SegmentValue::Exact(i + 1));
            let mut r = Rectangle::new([(0.0, lo), (*v, hi)], BLUE.mix(0.6).filled());
            r.set_margin(6, 6, 0, 0);
            r
        }))
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(format!("{v:.1}"), (*v, SegmentValue::CenterOf(i)), ("sans-serif", 14))
        }))
        .map_err(|e| anyhow!("{e}"))?;
    if let Some(t) = target {
        let line = [(t, SegmentValue::Exact(0)), (t, SegmentValue::Exact(bars.len()))];
        chart
            .draw_series(LineSeries::new(line, RED.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(format!("target {t}"))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED));
        chart.configure_series_labels().border_style(BLACK).draw().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}
