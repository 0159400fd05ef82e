//! `flotilla bench --plot FILE`: member objects present over time, one line per run, as a
//! self-contained SVG (no fonts or scripts fetched), so a baseline and the current build can be
//! compared at a glance and the file committed next to `docs/benchmarks.md`.

use std::fmt::Write as _;

/// One line of the plot.
#[derive(Clone, Debug)]
pub struct Series {
    /// The legend.
    pub label: String,
    /// `(seconds, member objects)`, in time order.
    pub points: Vec<(f64, usize)>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLOURS: &[&str] = &["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks up to `max`.
pub fn tick_step(max: f64, ticks: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / ticks.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn label(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// The SVG of `series` under `title`.
pub fn svg(title: &str, series: &[Series]) -> String {
    let max_x = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0_f64, f64::max);
    let max_y = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1 as f64))
        .fold(0.0_f64, f64::max);
    let x_step = tick_step(max_x, 8);
    let y_step = tick_step(max_y, 6);
    let x_max = (max_x / x_step).ceil().max(1.0) * x_step;
    let y_max = (max_y / y_step).ceil().max(1.0) * y_step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |v: f64| TOP + plot_h - v / y_max * plot_h;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Grid and ticks.
    let mut v = 0.0;
    while v <= x_max + x_step / 2.0 {
        let _ = writeln!(
            out,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#e5e5e5"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
            x(v),
            TOP + plot_h,
            TOP + plot_h + 16.0,
            label(v)
        );
        v += x_step;
    }
    let mut v = 0.0;
    while v <= y_max + y_step / 2.0 {
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#e5e5e5"/><text x="{2:.1}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            y(v),
            LEFT + plot_w,
            LEFT - 6.0,
            y(v) + 4.0,
            label(v)
        );
        v += y_step;
    }
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the first template was created</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 10.0
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">member objects present</text>"#,
        TOP + plot_h / 2.0
    );
    // The lines, starting from (0, 0), and the legend.
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut points = format!("{:.1},{:.1}", x(0.0), y(0.0));
        for (t, n) in &s.points {
            let _ = write!(points, " {:.1},{:.1}", x(*t), y(*n as f64));
        }
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>"#
        );
        let legend_y = TOP + 16.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{0:.1}" y1="{1:.1}" x2="{2:.1}" y2="{1:.1}" stroke="{colour}" stroke-width="2"/><text x="{3:.1}" y="{4:.1}">{5}</text>"#,
            LEFT + 12.0,
            legend_y,
            LEFT + 36.0,
            LEFT + 42.0,
            legend_y + 4.0,
            escape(&s.label)
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_are_one_two_or_five_times_a_power_of_ten() {
        for (max, ticks, step) in [
            (100.0, 5, 20.0),
            (12.0, 6, 2.0),
            (0.9, 8, 0.2),
            (30_000.0, 6, 5000.0),
            (7.0, 8, 1.0),
            (0.0, 6, 1.0),
        ] {
            let got = tick_step(max, ticks);
            assert!(
                (got - step).abs() < 1e-9,
                "tick_step({max}, {ticks}) = {got}, want {step}"
            );
        }
    }

    #[test]
    fn one_polyline_per_series_ending_at_its_last_point() {
        let series = vec![
            Series {
                label: "baseline <main>".to_owned(),
                points: vec![(1.0, 10), (4.0, 100)],
            },
            Series {
                label: "current".to_owned(),
                points: vec![(0.5, 50), (2.0, 100)],
            },
        ];
        let svg = svg("100 Deployments & ConfigMaps", &series);
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        // Escaped text, never raw markup.
        assert!(svg.contains("baseline &lt;main&gt;"));
        assert!(svg.contains("Deployments &amp; ConfigMaps"));
        // x axis up to 4 s, y axis up to 100: the last point of the baseline is the plot's
        // top-right corner.
        let corner = format!("{:.1},{:.1}", WIDTH - RIGHT, TOP);
        assert!(svg.contains(&corner), "{corner} not in {svg}");
        // Both lines start at the origin.
        let origin = format!("{:.1},{:.1}", LEFT, HEIGHT - BOTTOM);
        assert_eq!(svg.matches(&format!("points=\"{origin}")).count(), 2);
    }

    #[test]
    fn an_empty_plot_is_still_a_valid_document() {
        let svg = svg("nothing", &[]);
        assert!(svg.contains("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 0);
    }
}
