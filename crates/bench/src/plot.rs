//! `--plot FILE.svg`: the failover latency CDF of each system, one line each.

use super::stats::cdf;
use anyhow::{anyhow, Context};
use plotters::prelude::*;
use std::path::Path;

/// Chart size in pixels.
const SIZE: (u32, u32) = (800, 500);
/// The x axis starts at this share of the fastest sample.
const X_MIN_SHARE: f64 = 0.9;
/// Line colours, one per system in order.
const COLOURS: [RGBColor; 4] = [RGBColor(31, 119, 180), RGBColor(214, 39, 40), GREEN, BLACK];

/// Writes an SVG with one CDF line per (name, samples in ms).
pub fn write_cdf(path: &Path, title: &str, series: &[(String, Vec<f64>)]) -> anyhow::Result<()> {
    let all = || series.iter().flat_map(|(_, s)| s.iter().copied());
    let max = all().fold(0.0_f64, f64::max);
    let min = all().fold(f64::INFINITY, f64::min);
    let x_max = (max * 1.05).max(1.0);
    // Start near the fastest failover: crash failovers all sit above the
    // election timeout, and an axis from 0 would squeeze them into a corner.
    let x_min = if min.is_finite() { (min * X_MIN_SHARE).floor() } else { 0.0 };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    let err = |e: DrawingAreaErrorKind<_>| anyhow!("drawing {}: {e:?}", path.display());
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(55)
        .build_cartesian_2d(x_min..x_max, 0.0..1.0_f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("failover (ms)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("fraction of failovers")
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
            .label(format!("{name} ({} trials)", samples.len()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_lines_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cdf.svg");
        let series = vec![
            ("tenure".to_string(), vec![950.0, 960.0, 1010.0]),
            ("etcd".to_string(), vec![1100.0, 1500.0, 4100.0]),
        ];
        write_cdf(&path, "failover", &series).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("tenure (3 trials)") && svg.contains("etcd (3 trials)"));
        assert!(svg.contains("failover (ms)"));
        assert!(svg.matches("<polyline").count() >= 2, "one line per system");
    }
}
