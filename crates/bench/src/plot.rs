//! `--plot FILE.svg`: latency CDFs, one line per series (each system's
//! failovers; each system's writes before and during a change of members),
//! and x–y lines (each system's renewal p99 against the sessions held, its
//! writes a second against the disk's sync latency).

use super::stats::cdf;
use anyhow::{anyhow, Context};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// Chart size in pixels.
const SIZE: (u32, u32) = (800, 500);
/// The x axis starts at this share of the fastest sample.
const X_MIN_SHARE: f64 = 0.9;
/// Labels on a linear x axis (plotters' default).
const X_LABELS: usize = 10;
/// Labels on a linear y axis.
const Y_LABELS: usize = 10;
/// A linear y axis ends this far above the highest point: room for the
/// legend in the upper left corner.
const LINEAR_HEADROOM: f64 = 1.35;
/// Line colours, one per system in order.
const COLOURS: [RGBColor; 4] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), GREEN, BLACK];

/// What a chart's axes and legend say.
#[derive(Debug, Clone, Copy)]
pub struct Axes<'a> {
    /// The x axis ("failover (ms)").
    pub x: &'a str,
    /// The y axis ("fraction of failovers").
    pub y: &'a str,
    /// What a sample is, in the legend ("trials").
    pub samples: &'a str,
    /// A logarithmic x axis (latencies from 1 ms to seconds on one chart).
    pub log_x: bool,
}

/// The axes of the failover charts.
pub const FAILOVER_AXES: Axes<'static> =
    Axes { x: "failover (ms)", y: "fraction of failovers", samples: "trials", log_x: false };

/// Writes an SVG with one CDF line per (name, samples in ms).
pub fn write_cdf(
    path: &Path,
    title: &str,
    axes: Axes<'_>,
    series: &[(String, Vec<f64>)],
) -> anyhow::Result<()> {
    // A log axis is drawn as a linear one over log10 of the samples, its
    // labels turned back into ms.
    let series: Vec<(String, Vec<f64>)> = match axes.log_x {
        false => series.to_vec(),
        true => series
            .iter()
            .map(|(name, s)| (name.clone(), s.iter().map(|v| v.max(0.001).log10()).collect()))
            .collect(),
    };
    let all = || series.iter().flat_map(|(_, s)| s.iter().copied());
    let max = all().fold(f64::NEG_INFINITY, f64::max);
    let min = all().fold(f64::INFINITY, f64::min);
    let (x_min, x_max) = match axes.log_x {
        true => decades(min, max),
        // Start near the fastest failover: crash failovers all sit above the
        // election timeout, and an axis from 0 would squeeze them into a corner.
        false if min.is_finite() => ((min * X_MIN_SHARE).floor(), (max * 1.05).max(1.0)),
        false => (0.0, 1.0),
    };
    let label = |v: &f64| match axes.log_x {
        true => ms_label(10f64.powf(*v)),
        false => format!("{v:.0}"),
    };
    // A log axis is labelled at each decade.
    let x_labels = match axes.log_x {
        true => (x_max - x_min) as usize + 1,
        false => X_LABELS,
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let mut chart =
        builder(&root, title).build_cartesian_2d(x_min..x_max, 0.0..1.0_f64).map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(x_labels)
        .x_desc(axes.x)
        .x_label_formatter(&label)
        .y_desc(axes.y)
        .draw()
        .map_err(err)?;
    for (k, (name, samples)) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        // A step function: flat until each sample, then up to its fraction.
        let mut points = vec![(x_min, 0.0)];
        let mut last_y = 0.0;
        for (x, y) in cdf(samples) {
            points.push((x, last_y));
            points.push((x, y));
            last_y = y;
        }
        points.push((x_max, last_y));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(err)?
            .label(format!("{name} ({} {})", samples.len(), axes.samples))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    finish(&mut chart, &root, path)
}

/// One line of an x–y chart: its name and its points (x, y, whether the
/// point failed: drawn as a cross instead of a dot).
pub type Series = (String, Vec<(f64, f64, bool)>);

/// Gathers `(name, point)` pairs into one series per name, in the order
/// the names first come.
pub fn series_by_name<'a>(
    points: impl IntoIterator<Item = (&'a str, (f64, f64, bool))>,
) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (name, point) in points {
        match series.iter_mut().find(|(n, _)| n == name) {
            Some((_, points)) => points.push(point),
            None => series.push((name.to_string(), vec![point])),
        }
    }
    series
}

/// What an x–y chart's axes and legend say.
#[derive(Debug, Clone, Copy)]
pub struct XyAxes<'a> {
    /// The x axis ("sessions held"), linear from 0.
    pub x: &'a str,
    /// The y axis ("renewal p99 (ms)").
    pub y: &'a str,
    /// A logarithmic y axis in milliseconds (whole decades around the
    /// values); linear from 0 otherwise.
    pub log_y: bool,
    /// What a cross means, in the legend ("false expiries").
    pub failed: &'a str,
}

/// Writes an SVG with one line per series over a linear x axis from 0 and
/// a y axis as `axes` says.
pub fn write_xy(
    path: &Path,
    title: &str,
    axes: XyAxes<'_>,
    series: &[Series],
) -> anyhow::Result<()> {
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let x_max = all().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    // Where a y value is drawn: its log10 on a logarithmic axis.
    let y_at = |y: f64| if axes.log_y { y.max(0.001).log10() } else { y };
    let ys = || all().map(|p| y_at(p.1));
    let (y_min, y_max) = match axes.log_y {
        true => decades(ys().fold(f64::INFINITY, f64::min), ys().fold(f64::NEG_INFINITY, f64::max)),
        // Headroom above the highest point for the legend.
        false => (0.0, ys().fold(1.0, f64::max) * LINEAR_HEADROOM),
    };
    let (y_labels, y_label): (usize, &dyn Fn(&f64) -> String) = match axes.log_y {
        true => ((y_max - y_min) as usize + 1, &|v| ms_label(10f64.powf(*v))),
        false => (Y_LABELS, &|v| format!("{v:.0}")),
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let mut chart =
        builder(&root, title).build_cartesian_2d(0.0..x_max, y_min..y_max).map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(X_LABELS)
        .x_desc(axes.x)
        .x_label_formatter(&|v: &f64| match x_max < 20.0 {
            true => format!("{v:.1}"),
            false => format!("{v:.0}"),
        })
        .y_labels(y_labels)
        .y_desc(axes.y)
        .y_label_formatter(y_label)
        .draw()
        .map_err(err)?;
    for (k, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let at = |&(x, y, _): &(f64, f64, bool)| (x, y_at(y));
        chart
            .draw_series(LineSeries::new(points.iter().map(at), colour.stroke_width(2)))
            .map_err(err)?
            .label(format!("{name} (cross: {})", axes.failed))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        let ok = points.iter().filter(|p| !p.2).map(|p| Circle::new(at(p), 4, colour.filled()));
        chart.draw_series(ok).map_err(err)?;
        let failed =
            points.iter().filter(|p| p.2).map(|p| Cross::new(at(p), 7, colour.stroke_width(3)));
        chart.draw_series(failed).map_err(err)?;
    }
    finish(&mut chart, &root, path)
}

/// The whole decades around log10 values from `low` to `high` (0 to 1
/// when there are none).
fn decades(low: f64, high: f64) -> (f64, f64) {
    match low.is_finite() {
        true => (low.floor(), high.ceil().max(low.floor() + 1.0)),
        false => (0.0, 1.0),
    }
}

/// A chart on `root` with `title` and room for both axes' labels.
fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 20)).margin(15).x_label_area_size(45).y_label_area_size(55);
    b
}

/// Draws `chart`'s legend in its upper left corner and writes the SVG.
fn finish<'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    root: &DrawingArea<SVGBackend<'a>, Shift>,
    path: &Path,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("drawing {}: {e:?}", path.display()))?;
    root.present().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `ms` in as few digits as say it: 1000, 25, 2.5, 0.25.
fn ms_label(ms: f64) -> String {
    let digits = if ms >= 10.0 {
        0
    } else if ms >= 1.0 {
        1
    } else {
        2
    };
    let text = format!("{ms:.digits$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_xy_svg_with_dots_crosses_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("xy.svg");
        let series: Vec<Series> = vec![
            ("tenure".into(), vec![(100_000.0, 3.4, false), (1_000_000.0, 700.0, true)]),
            ("etcd".into(), vec![(100_000.0, 18.7, false)]),
        ];
        let axes = XyAxes {
            x: "sessions held",
            y: "renewal p99 (ms)",
            log_y: true,
            failed: "false expiries",
        };
        write_xy(&path, "renewals", axes, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in [
            "renewals",
            "sessions held",
            "renewal p99 (ms)",
            "tenure (cross: false expiries)",
            "etcd",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert_eq!(svg.matches("<circle").count(), 2, "one dot per point that held");
        // The decades 1 ms to 1000 ms are labelled.
        let label = |t: &str| svg.lines().any(|l| l.trim() == t);
        assert!(label("1") && label("1000") && label("1000000"), "{svg}");
    }

    #[test]
    fn a_linear_y_axis_starts_at_zero_and_a_short_x_axis_has_tenths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.svg");
        let series: Vec<Series> = vec![
            ("tenure".into(), vec![(0.2, 14_000.0, false), (8.2, 3_700.0, false)]),
            ("etcd".into(), vec![(0.2, 5_000.0, false), (8.2, 1_900.0, true)]),
        ];
        let axes = XyAxes { x: "sync (ms)", y: "writes/s", log_y: false, failed: "errors" };
        write_xy(&path, "writes", axes, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let label = |t: &str| svg.lines().any(|l| l.trim() == t);
        assert!(label("0") && label("2000") && label("18000"), "whole writes/s from 0: {svg}");
        assert!(label("0.5") || label("1.0"), "tenths on a short x axis: {svg}");
        assert_eq!(svg.matches("<circle").count(), 3, "one dot per point without errors");
    }

    #[test]
    fn writes_an_svg_with_lines_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cdf.svg");
        let series = vec![
            ("tenure".to_string(), vec![950.0, 960.0, 1010.0]),
            ("etcd".to_string(), vec![1100.0, 1500.0, 4100.0]),
        ];
        write_cdf(&path, "failover", FAILOVER_AXES, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("tenure (3 trials)") && svg.contains("etcd (3 trials)"));
        assert!(svg.contains("failover (ms)"));
        assert!(svg.matches("<polyline").count() >= 2, "one line per system");
    }

    #[test]
    fn a_log_axis_spans_whole_decades_labelled_in_ms() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("writes.svg");
        let axes = Axes {
            x: "write latency (ms)",
            y: "fraction of writes",
            samples: "writes",
            log_x: true,
        };
        let series = vec![("tenure before".to_string(), vec![1.5, 3.0, 250.0])];
        write_cdf(&path, "writes", axes, &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("tenure before (3 writes)") && svg.contains("write latency (ms)"));
        // The axis runs from 10^0 to 10^3 ms, labelled at each decade.
        let labels: Vec<&str> = svg.lines().map(str::trim).collect();
        for decade in ["1", "10", "100", "1000"] {
            assert!(labels.contains(&decade), "no label {decade} ms");
        }
        assert_eq!(
            [ms_label(1.0), ms_label(2.5), ms_label(0.25), ms_label(316.2)],
            ["1", "2.5", "0.25", "316"]
        );
    }
}
