//! Round lines, the performance-guide table (CPU | memory | highest
//! syscalls/s without drops | EPS) and the chart.

use super::{Opts, Row, MAX_RATE};
use crate::report::{bar_chart, num, register_font, Table};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// Falco's published figures (performance-testing guide): CPU limit, highest
/// syscalls/s without drops.
pub const FALCO: [(f64, f64); 3] = [(0.5, 150_000.0), (1.0, 250_000.0), (2.0, 320_000.0)];

pub fn rate_label(rate: u64) -> String {
    match rate {
        0 => "none".into(),
        MAX_RATE => "max".into(),
        r if r % 1_000_000 == 0 => format!("{}M/s", r / 1_000_000),
        r => format!("{}K/s", r / 1000),
    }
}

pub fn round_header() -> String {
    format!(
        "{:<16} {:>4} {:>6} {:>8} {:>10} {:>10} {:>10} {:>9} {:>7} {:>7} {:>6} {:>7}",
        "variant",
        "CPU",
        "round",
        "load",
        "actions/s",
        "syscalls/s",
        "events/s",
        "lost",
        "drops",
        "CPU %",
        "RSS MB",
        "sleep"
    )
}

pub fn round_line(r: &Row) -> String {
    format!(
        "{:<16} {:>4} {:>6} {:>8} {:>10.0} {:>10.1} {:>10.0} {:>10.0} {:>8.1}% {:>7} {:>7.1} {:>6.1} {:>7}",
        r.variant,
        r.cpus,
        r.round.number,
        rate_label(r.target),
        r.load_rate,
        r.round.throughput,
        r.syscalls_rate,
        r.events_rate,
        r.round.lost * 100.0,
        r.drops,
        r.cpu_pct,
        r.rss_mb,
        format!("{:.2?}", r.round.sleep),
    )
}

pub struct Summary<'a> {
    pub rows: &'a [Row],
    pub cost: &'a [(String, usize, u64, f64)],
    pub notes: &'a [String],
    pub opts: &'a Opts,
    pub load_cpu: Option<usize>,
    pub names: &'a [&'a str],
    /// Syscalls/s the load thread issues with no sensor attached.
    pub capacity: f64,
}

/// Per (variant, CPU limit): the best clean rounds.
struct Best<'a> {
    variant: &'a str,
    cpus: f64,
    peak_rss: f64,
    no_drops: Option<&'a Row>,
    clean: Option<&'a Row>,
}

/// " (load-bound)" when no round of this group dropped: the sensor kept up
/// with all the load this machine could make, so its limit lies higher.
fn bound(rows: &[Row], b: &Best) -> &'static str {
    let group = rows.iter().filter(|r| r.variant == b.variant && r.cpus == b.cpus);
    if group.clone().all(|r| r.drops == 0) {
        " (load-bound)"
    } else {
        ""
    }
}

fn best(rows: &[Row]) -> Vec<Best<'_>> {
    let mut out: Vec<Best> = Vec::new();
    for r in rows {
        let i = match out.iter().position(|b| b.variant == r.variant && b.cpus == r.cpus) {
            Some(i) => i,
            None => {
                out.push(Best {
                    variant: &r.variant,
                    cpus: r.cpus,
                    peak_rss: 0.0,
                    no_drops: None,
                    clean: None,
                });
                out.len() - 1
            }
        };
        let b = &mut out[i];
        b.peak_rss = b.peak_rss.max(r.hwm_mb);
        let higher = |cur: Option<&Row>| cur.is_none_or(|c| r.syscalls_rate > c.syscalls_rate);
        if r.drops == 0 && higher(b.no_drops) {
            b.no_drops = Some(r);
        }
        if r.drops == 0 && r.no_lost_alert() && higher(b.clean) {
            b.clean = Some(r);
        }
    }
    out
}

/// Sensor CPU (% of one CPU) against syscalls/s, a line per (variant, limit),
/// with each limit as a dashed level: the headroom left at each load step.
fn cpu_chart(path: &Path, rows: &[Row]) -> Result<()> {
    register_font()?;
    let max_x = rows.iter().map(|r| r.syscalls_rate / 1000.0).fold(1.0, f64::max) * 1.1;
    let max_y = rows.iter().map(|r| r.cpu_pct.max(r.cpus * 100.0)).fold(1.0, f64::max) * 1.1;
    let root = BitMapBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("harrier run CPU against captured syscalls/s (Falco's method)", ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_x, 0.0..max_y)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("thousand syscalls per second seen by the sensor")
        .y_desc("sensor CPU % (100 = one CPU)")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    let mut groups: Vec<(&str, f64)> = Vec::new();
    for r in rows {
        if !groups.contains(&(r.variant.as_str(), r.cpus)) {
            groups.push((r.variant.as_str(), r.cpus));
        }
    }
    for (i, (variant, cpus)) in groups.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.variant == *variant && r.cpus == *cpus)
            .map(|r| (r.syscalls_rate / 1000.0, r.cpu_pct))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(format!("{variant}, {cpus} CPU limit"))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(|e| anyhow!("{e}"))?;
        let limit = [(0.0, cpus * 100.0), (max_x, cpus * 100.0)];
        chart
            .draw_series(DashedLineSeries::new(limit, 6, 4, color.stroke_width(1)))
            .map_err(|e| anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

impl Summary<'_> {
    fn rounds_table(&self) -> Table {
        let header = [
            "variant",
            "CPU limit",
            "round",
            "load step",
            "load issued/s",
            "syscalls/s (sensor)",
            "events/s sent",
            "drops",
            "actions/s (EPS)",
            "lost alerts",
            "sensor CPU %",
            "RSS MB",
            "throttled",
            "sleep",
        ];
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.variant.clone(),
                    r.cpus.to_string(),
                    r.round.number.to_string(),
                    rate_label(r.target),
                    num(r.load_rate, 0),
                    num(r.syscalls_rate, 0),
                    num(r.events_rate, 0),
                    r.drops.to_string(),
                    num(r.round.throughput, 1),
                    format!("{:.1}%", r.round.lost * 100.0),
                    num(r.cpu_pct, 1),
                    num(r.rss_mb, 1),
                    r.throttled.to_string(),
                    format!("{:.2?}", r.round.sleep),
                ]
            })
            .collect();
        Table { header: header.map(String::from).to_vec(), rows }
    }

    /// Expected (actions run) against actual (alerts) per action, summed.
    fn actions_table(&self) -> Table {
        let rows = self
            .names
            .iter()
            .map(|&name| {
                let (mut e, mut a) = (0u64, 0u64);
                for s in self.rows.iter().flat_map(|r| &r.round.per_action).filter(|s| s.name == name) {
                    e += s.expected;
                    a += s.actual;
                }
                let ratio = if e > 0 { a as f64 / e as f64 } else { 0.0 };
                vec![name.to_string(), e.to_string(), a.to_string(), num(ratio, 3)]
            })
            .collect();
        Table { header: ["action", "expected", "actual", "ratio"].map(String::from).to_vec(), rows }
    }

    fn guide_table(&self, best: &[Best]) -> Table {
        let header = [
            "CPU",
            "variant",
            "memory (peak RSS)",
            "highest syscalls/s without drops",
            "EPS there",
            "highest syscalls/s without drops or lost alerts",
            "EPS there",
            "sensor CPU % there",
            "sensor CPU ns per syscall there",
            "quota / that (linear projection)",
            "events/s sent there",
        ];
        let cell = |r: Option<&Row>, f: &dyn Fn(&Row) -> String| r.map_or("-".to_string(), f);
        let mut rows: Vec<Vec<String>> = best
            .iter()
            .map(|b| {
                vec![
                    b.cpus.to_string(),
                    format!("Harrier, {}", b.variant),
                    format!("{:.1} MB", b.peak_rss),
                    cell(b.no_drops, &|r| format!("{}{}", num(r.syscalls_rate, 0), bound(self.rows, b))),
                    cell(b.no_drops, &|r| num(r.round.throughput, 1)),
                    cell(b.clean, &|r| num(r.syscalls_rate, 0)),
                    cell(b.clean, &|r| num(r.round.throughput, 1)),
                    cell(b.clean, &|r| num(r.cpu_pct, 1)),
                    cell(b.clean, &|r| num(r.cpu_pct * 1e7 / r.syscalls_rate.max(1.0), 0)),
                    cell(b.clean, &|r| num(b.cpus * 100.0 / r.cpu_pct.max(0.1) * r.syscalls_rate, 0)),
                    cell(b.clean, &|r| num(r.events_rate, 0)),
                ]
            })
            .collect();
        for (cpus, rate) in FALCO {
            rows.push(vec![
                cpus.to_string(),
                "Falco (published)".into(),
                "36-121 MB".into(),
                num(rate, 0),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
        }
        Table { header: header.map(String::from).to_vec(), rows }
    }

    pub fn write(&self, out: &Path) -> Result<()> {
        let best = best(self.rows);
        let o = self.opts;
        let mut md = format!(
            "Falco's performance-testing method: event-generator `bench --loop` rounds ({:?} of actions, \
             {:?} of rest, sleep from {:?} halving after clean rounds) with {} actions ({}), alerts over \
             `harrier run`'s HTTP output; a load thread pinned to CPU {} raising captured syscalls (openat, \
             close, socket, connect, execve) one step per round; `harrier run` with {} in a cgroup CPU \
             quota. syscalls/s is counted by the sensor in the kernel; the machine is shared, so it includes \
             other processes' syscalls. The load thread alone, with no sensor attached, issues {:.0} \
             syscalls/s: the highest rate this machine's other core generates; \"load-bound\" marks a limit \
             at which no load step dropped, so the sensor's own limit lies higher; the projection divides \
             the quota by the sensor's measured CPU per syscall (an estimate, not a measurement).\n\n{}\n",
            o.round,
            o.round,
            o.sleep,
            self.names.len(),
            self.names.join(", "),
            self.load_cpu.map_or("-".into(), |c| c.to_string()),
            o.rules.join(", "),
            self.capacity,
            self.guide_table(&best).markdown(),
        );
        if !self.cost.is_empty() {
            md += "\nUser-space CPU per event (`harrier-bench rules-cost`: state + rules, replayed events):\n\n";
            let t = Table {
                header: ["rules", "events", "alerts", "ns/event (median)"].map(String::from).to_vec(),
                rows: self
                    .cost
                    .iter()
                    .map(|(l, n, a, ns)| vec![l.clone(), n.to_string(), a.to_string(), num(*ns, 1)])
                    .collect(),
            };
            md += &t.markdown();
        }
        md += &format!("\nPer action, all rounds:\n\n{}", self.actions_table().markdown());
        md += &format!("\nEvery round:\n\n{}", self.rounds_table().markdown());
        for n in self.notes {
            md += &format!("\n- {n}");
        }
        md += "\n";
        println!("{md}");
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("rules-load.md"), &md)?;
        let mut bars: Vec<(String, f64)> = Vec::new();
        for (cpus, rate) in FALCO {
            bars.push((format!("Falco (published), {cpus} CPU"), rate / 1000.0));
            for b in best.iter().filter(|b| b.cpus == cpus) {
                let v = b.no_drops.map_or(0.0, |r| r.syscalls_rate / 1000.0);
                bars.push((format!("Harrier, {}, {cpus} CPU{}", b.variant, bound(self.rows, b)), v));
            }
        }
        for b in best.iter().filter(|b| !FALCO.iter().any(|f| f.0 == b.cpus)) {
            let v = b.no_drops.map_or(0.0, |r| r.syscalls_rate / 1000.0);
            bars.push((format!("Harrier, {}, {} CPU{}", b.variant, b.cpus, bound(self.rows, b)), v));
        }
        bar_chart(
            &out.join("rules-load.png"),
            "Highest syscalls/s without drops, sensor under a CPU quota",
            "thousand syscalls per second",
            &bars,
            Some(1000.0),
        )?;
        if !self.rows.is_empty() {
            cpu_chart(&out.join("rules-load-cpu.png"), self.rows)?;
        }
        eprintln!(
            "rules-load: wrote {0}/rules-load.md, rules-load.png and rules-load-cpu.png",
            out.display()
        );
        Ok(())
    }
}
