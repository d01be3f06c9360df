//! Approximate list prices, in US dollars per million input and output tokens, for
//! the cost the sdk backend records. Unknown models record no cost rather than a
//! wrong one; `SDK_PRICE_PER_MTOK="in,out"` in the agent's env sets the price for any
//! model (a local model: "0,0").

use domain::protocol::Usage;

const PRICES: &[(&str, f64, f64)] = &[
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-haiku-4", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("gpt-5-nano", 0.05, 0.4),
    ("gpt-5-mini", 0.25, 2.0),
    ("gpt-5", 1.25, 10.0),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1", 2.0, 8.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("gpt-4o", 2.5, 10.0),
];

fn per_mtok(model: &str) -> Option<(f64, f64)> {
    if let Ok(s) = std::env::var("SDK_PRICE_PER_MTOK")
        && let Some((a, b)) = s.split_once(',')
        && let (Ok(a), Ok(b)) = (a.trim().parse(), b.trim().parse())
    {
        return Some((a, b));
    }
    // Longest prefix first, so gpt-5-mini is not priced as gpt-5.
    PRICES
        .iter()
        .filter(|(p, _, _)| model.starts_with(p))
        .max_by_key(|(p, _, _)| p.len())
        .map(|(_, i, o)| (*i, *o))
}

pub fn cost(model: &str, u: &Usage) -> Option<f64> {
    per_mtok(model).map(|(i, o)| (u.input_tokens as f64 * i + u.output_tokens as f64 * o) / 1e6)
}
