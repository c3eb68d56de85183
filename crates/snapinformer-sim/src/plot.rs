//! SVG and PNG plots of a report: staleness distribution and queue depth over time.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::store_scenario::BackendReport;

/// Why plots could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No TrueType font was found to draw text with.
    #[error(
        "no TrueType font found (looked for DejaVu Sans under /usr/share/fonts); install fonts-dejavu-core to get plots"
    )]
    NoFont,
    /// Drawing failed.
    #[error("drawing {path}: {message}")]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn register_font() -> Result<(), PlotError> {
    let bytes = FONT_PATHS.iter().find_map(|p| std::fs::read(p).ok()).ok_or(PlotError::NoFont)?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| PlotError::NoFont)
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

fn draw_err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw { path: path.to_owned(), message: e.to_string() }
}

fn staleness<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    backends: &[BackendReport],
    title: &str,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_us = backends.iter().map(|b| b.staleness_us.max).max().unwrap_or(1).max(10) as f64;
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((1f64..max_us * 1.5).log_scale(), 0f64..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("staleness: arrival to visibility (us, log scale)")
        .y_desc("fraction of updates")
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, b) in backends.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> =
            b.staleness_cdf.iter().map(|&(v, f)| (v.max(1) as f64, f)).collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{} (p99 {} us)", b.name, b.staleness_us.p99))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

fn depth<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    backends: &[BackendReport],
    title: &str,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_t =
        backends.iter().flat_map(|b| b.depth_series.last()).map(|p| p.0).fold(1.0, f64::max);
    let max_d =
        backends.iter().flat_map(|b| b.depth_series.iter()).map(|p| p.1).max().unwrap_or(1).max(10)
            as f64;
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_t, (1f64..max_d * 1.5).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("queued updates (log scale)")
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, b) in backends.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> =
            b.depth_series.iter().map(|&(t, d)| (t, d.max(1) as f64)).collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{} (max {})", b.name, b.queue_depth_max))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// Writes `staleness.{svg,png}` and `queue_depth.{svg,png}` into `dir`. Returns the files written.
pub fn write_plots(
    dir: &Path,
    backends: &[BackendReport],
    subtitle: &str,
) -> Result<Vec<PathBuf>, PlotError> {
    register_font()?;
    let mut written = Vec::new();
    let size = (1000, 600);
    let s_title = format!("Staleness CDF ({subtitle})");
    let d_title = format!("Queue depth over time ({subtitle})");
    let p = dir.join("staleness.svg");
    staleness(SVGBackend::new(&p, size).into_drawing_area(), backends, &s_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("staleness.png");
    staleness(BitMapBackend::new(&p, size).into_drawing_area(), backends, &s_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("queue_depth.svg");
    depth(SVGBackend::new(&p, size).into_drawing_area(), backends, &d_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("queue_depth.png");
    depth(BitMapBackend::new(&p, size).into_drawing_area(), backends, &d_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    Ok(written)
}
