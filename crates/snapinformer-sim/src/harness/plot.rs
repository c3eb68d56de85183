//! SVG and PNG plots of a report: staleness distribution and queue depth over time per row, and
//! staleness p99 and queue depth against the offered rate (a sweep).

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use plotters::prelude::*;

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

/// `Result` with the plot [`PlotError`] as the default error type.
pub type Result<T, E = PlotError> = std::result::Result<T, E>;

const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        let Some(bytes) = FONT_PATHS.iter().find_map(|p| std::fs::read(p).ok()) else {
            return false;
        };
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::NoFont) }
}

/// Row colours: distinct for up to twelve rows (a default `store` report has eleven), then
/// repeated.
const COLORS: [RGBColor; 12] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0xaa, 0xaa, 0xff),
];

fn draw_err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw { path: path.to_owned(), message: e.to_string() }
}

/// One row's series for the staleness and queue-depth plots.
#[derive(Debug, Clone, Copy)]
pub struct PlotRow<'a> {
    /// Row name (legend).
    pub name: &'a str,
    /// Staleness p99, microseconds (legend).
    pub staleness_p99_us: u64,
    /// `(staleness us, cumulative fraction)` points.
    pub staleness_cdf: &'a [(u64, f64)],
    /// Largest queue depth (legend).
    pub depth_max: u64,
    /// `(seconds, queue depth)` samples.
    pub depth_series: &'a [(f64, u64)],
}

/// One row's points of a sweep of the offered rate.
#[derive(Debug, Clone)]
pub struct SweepLine<'a> {
    /// Row name (legend).
    pub name: &'a str,
    /// `(offered updates/s, staleness p99 us, queue depth max)` per rate.
    pub points: Vec<(f64, f64, f64)>,
}

fn staleness<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    rows: &[PlotRow<'_>],
    title: &str,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_us =
        rows.iter().flat_map(|r| r.staleness_cdf.last().map(|p| p.0)).max().unwrap_or(1).max(10)
            as f64;
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((1f64..max_us * 1.5).log_scale(), 0f64..1.0)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("staleness (us, log scale)")
        .y_desc("fraction of updates")
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> =
            r.staleness_cdf.iter().map(|&(v, f)| (v.max(1) as f64, f)).collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{} (p99 {} us)", r.name, r.staleness_p99_us))
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
    rows: &[PlotRow<'_>],
    title: &str,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let max_t = rows.iter().flat_map(|r| r.depth_series.last()).map(|p| p.0).fold(1.0, f64::max);
    let max_d =
        rows.iter().flat_map(|r| r.depth_series.iter()).map(|p| p.1).max().unwrap_or(1).max(10)
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
    for (i, r) in rows.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> =
            r.depth_series.iter().map(|&(t, d)| (t, d.max(1) as f64)).collect();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(format!("{} (max {})", r.name, r.depth_max))
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

/// Which figure of a sweep a plot shows.
#[derive(Debug, Clone, Copy)]
enum SweepFigure {
    StalenessP99,
    DepthMax,
}

fn sweep<DB: DrawingBackend>(
    area: DrawingArea<DB, plotters::coord::Shift>,
    lines: &[SweepLine<'_>],
    figure: SweepFigure,
    title: &str,
    x_desc: &str,
) -> Result<(), String> {
    area.fill(&WHITE).map_err(|e| e.to_string())?;
    let value = |p: &(f64, f64, f64)| match figure {
        SweepFigure::StalenessP99 => p.1.max(1.0),
        SweepFigure::DepthMax => p.2.max(1.0),
    };
    let pts = || lines.iter().flat_map(|l| l.points.iter());
    let (min_x, max_x) =
        pts().fold((f64::MAX, 1.0f64), |(lo, hi), p| (lo.min(p.0.max(1.0)), hi.max(p.0)));
    let max_y = pts().map(value).fold(10.0, f64::max);
    let min_y = pts().map(value).fold(f64::MAX, f64::min).min(max_y);
    let min_x = if min_x == f64::MAX { 1.0 } else { min_x };
    let mut chart = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (min_x / 1.3..max_x * 1.3).log_scale(),
            ((min_y / 2.0).max(1.0)..max_y * 1.5).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    let y_desc = match figure {
        SweepFigure::StalenessP99 => "staleness p99 (us, log scale)",
        SweepFigure::DepthMax => "queue depth max (log scale)",
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| if *x >= 10.0 { format!("{x:.0}") } else { format!("{x:.1}") })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, l) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, value(p))).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(l.name.to_owned())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// The subtitle of plots drawn from the first of `repeat` runs: `subtitle`, with "run 1 of N"
/// when the set had more than one run (the median report's figures are not the curves').
pub fn first_run_subtitle(subtitle: &str, repeat: usize) -> String {
    if repeat > 1 { format!("{subtitle}; run 1 of {repeat}") } else { subtitle.to_owned() }
}

/// Writes `staleness.{svg,png}` and `queue_depth.{svg,png}` into `dir`. Returns the files
/// written.
pub fn write_plots(dir: &Path, rows: &[PlotRow<'_>], subtitle: &str) -> Result<Vec<PathBuf>> {
    register_font()?;
    let size = (1000, 600);
    let s_title = format!("Staleness CDF ({subtitle})");
    let d_title = format!("Queue depth over time ({subtitle})");
    let mut written = Vec::new();
    let p = dir.join("staleness.svg");
    staleness(SVGBackend::new(&p, size).into_drawing_area(), rows, &s_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("staleness.png");
    staleness(BitMapBackend::new(&p, size).into_drawing_area(), rows, &s_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("queue_depth.svg");
    depth(SVGBackend::new(&p, size).into_drawing_area(), rows, &d_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    let p = dir.join("queue_depth.png");
    depth(BitMapBackend::new(&p, size).into_drawing_area(), rows, &d_title)
        .map_err(|e| draw_err(&p, e))?;
    written.push(p);
    Ok(written)
}

/// Writes `sweep_staleness_p99.{svg,png}` and `sweep_queue_depth.{svg,png}` into `dir`: each
/// row's staleness p99 and largest queue depth against the offered rate. Returns the files
/// written.
pub fn write_sweep_plots(
    dir: &Path,
    lines: &[SweepLine<'_>],
    subtitle: &str,
) -> Result<Vec<PathBuf>> {
    let axis = SweepAxis { stem: "sweep", what: "offered rate", desc: "offered updates/s" };
    write_plots_against(dir, lines, subtitle, &axis)
}

/// What a sweep's points vary: the x axis of [`write_plots_against`].
#[derive(Debug, Clone, Copy)]
pub struct SweepAxis<'a> {
    /// File-name stem: `<stem>_staleness_p99` and `<stem>_queue_depth`.
    pub stem: &'a str,
    /// The title's name for it (e.g. "offered rate").
    pub what: &'a str,
    /// The axis label, with its unit (e.g. "offered updates/s"); drawn on a log scale.
    pub desc: &'a str,
}

/// Writes `<stem>_staleness_p99.{svg,png}` and `<stem>_queue_depth.{svg,png}` into `dir`: each
/// line's staleness p99 and largest queue depth against what `axis` names (the first value of
/// each point). Returns the files written.
pub fn write_plots_against(
    dir: &Path,
    lines: &[SweepLine<'_>],
    subtitle: &str,
    axis: &SweepAxis<'_>,
) -> Result<Vec<PathBuf>> {
    register_font()?;
    let size = (1000, 600);
    let mut written = Vec::new();
    for (suffix, figure, what) in [
        ("staleness_p99", SweepFigure::StalenessP99, "Staleness p99"),
        ("queue_depth", SweepFigure::DepthMax, "Queue depth max"),
    ] {
        let title = format!("{what} against {} ({subtitle})", axis.what);
        let x_desc = format!("{} (log scale)", axis.desc);
        let stem = format!("{}_{suffix}", axis.stem);
        let p = dir.join(format!("{stem}.svg"));
        sweep(SVGBackend::new(&p, size).into_drawing_area(), lines, figure, &title, &x_desc)
            .map_err(|e| draw_err(&p, e))?;
        written.push(p);
        let p = dir.join(format!("{stem}.png"));
        sweep(BitMapBackend::new(&p, size).into_drawing_area(), lines, figure, &title, &x_desc)
            .map_err(|e| draw_err(&p, e))?;
        written.push(p);
    }
    Ok(written)
}
