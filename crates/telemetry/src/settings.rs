//! What the exporter is made with, read from the environment within bounds:
//! the batch processor's `OTEL_BSP_*` (the SDK would take any number, and makes
//! its queue that long at once: `OTEL_BSP_MAX_QUEUE_SIZE=100000000` was gigabytes
//! before the first span), and the resource every span carries.

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::{
    EnvResourceDetector, ResourceDetector, SdkProvidedResourceDetector, TelemetryResourceDetector,
};
use opentelemetry_sdk::trace::{BatchConfig, BatchConfigBuilder};
use std::time::Duration;

/// One `OTEL_BSP_*` variable honoured: its name, default and bounds.
struct Knob {
    name: &'static str,
    default: u64,
    min: u64,
    max: u64,
}

/// Spans held for export at most (the SDK's default is 2048): the queue is
/// allocated whole when the exporter is made.
const QUEUE: Knob = Knob {
    name: "OTEL_BSP_MAX_QUEUE_SIZE",
    default: 2048,
    min: 1,
    max: 16_384,
};
/// Spans in one export at most (and never more than the queue).
const BATCH: Knob = Knob {
    name: "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    default: 512,
    min: 1,
    max: 16_384,
};
/// Milliseconds between two exports: below the minimum the processor's thread
/// would spin.
const DELAY: Knob = Knob {
    name: "OTEL_BSP_SCHEDULE_DELAY",
    default: 5000,
    min: 10,
    max: 60_000,
};

/// The value `raw` sets for `knob`, and what was wrong with it: not a whole
/// number (the default is used), or out of bounds (the nearest bound is).
fn bounded(knob: &Knob, raw: Option<&str>) -> (u64, Option<String>) {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        return (knob.default, None);
    };
    let Knob {
        name,
        default,
        min,
        max,
    } = *knob;
    match raw.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => (v, None),
        Ok(v) => {
            let used = v.clamp(min, max);
            let why = format!("{name}={v} is out of bounds ({min} to {max}): {used} is used");
            (used, Some(why))
        }
        Err(_) => {
            let why = format!(
                "{name}={raw:?} is not a whole number from {min} to {max}: the default {default} is used"
            );
            (default, Some(why))
        }
    }
}

/// The batch processor's settings from `var` (the environment), within bounds,
/// and a warning for each variable that was not.
pub(crate) fn batch(var: impl Fn(&str) -> Option<String>) -> (BatchConfig, Vec<String>) {
    let mut warnings = Vec::new();
    let mut read = |knob: &Knob| {
        let (v, why) = bounded(knob, var(knob.name).as_deref());
        warnings.extend(why);
        v
    };
    let queue = read(&QUEUE);
    let batch = read(&BATCH).min(queue);
    let delay = read(&DELAY);
    // Every value set here, so the SDK's own unbounded reading is overridden.
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(queue as usize)
        .with_max_export_batch_size(batch as usize)
        .with_scheduled_delay(Duration::from_millis(delay))
        .build();
    (config, warnings)
}

/// What every span of this process carries: `service.name` (`OTEL_SERVICE_NAME`
/// else `service`), `service.version`, `service.instance.id` (new for each
/// process), `host.name`, and `OTEL_RESOURCE_ATTRIBUTES` (which may set the
/// last two).
pub(crate) fn resource(service: &'static str) -> Resource {
    let mut ours = vec![
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("service.instance.id", instance_id()),
    ];
    if let Some(host) = host_name() {
        ours.push(KeyValue::new("host.name", host));
    }
    let detectors: [Box<dyn ResourceDetector>; 3] = [
        Box::new(SdkProvidedResourceDetector),
        Box::new(TelemetryResourceDetector),
        Box::new(EnvResourceDetector::new()),
    ];
    let mut resource = Resource::builder_empty()
        .with_attributes(ours)
        .with_detectors(&detectors);
    if super::set("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service);
    }
    resource.build()
}

/// A random UUID (version 4), from the SDK's random ids.
fn instance_id() -> String {
    use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
    let mut bytes = RandomIdGenerator::default().new_trace_id().to_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The machine's name (Linux), else `HOSTNAME`.
fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_batch_setting_is_bounded() {
        // (variable, its value, what is used, whether a warning names it)
        let cases: &[(&Knob, Option<&str>, u64, bool)] = &[
            (&QUEUE, None, 2048, false),
            (&QUEUE, Some(""), 2048, false),
            (&QUEUE, Some("4096"), 4096, false),
            (&QUEUE, Some("100000000"), 16_384, true),
            (&QUEUE, Some("18446744073709551615"), 16_384, true),
            (&QUEUE, Some("0"), 1, true),
            (&QUEUE, Some("-5"), 2048, true),
            (&QUEUE, Some("lots"), 2048, true),
            (&QUEUE, Some("99999999999999999999999"), 2048, true),
            (&BATCH, Some("1000000"), 16_384, true),
            (&BATCH, Some("256"), 256, false),
            (&DELAY, Some("0"), 10, true),
            (&DELAY, Some("100"), 100, false),
            (&DELAY, Some("86400000"), 60_000, true),
        ];
        for &(knob, raw, want, warns) in cases {
            let (got, why) = bounded(knob, raw);
            assert_eq!(got, want, "{} = {raw:?}", knob.name);
            assert_eq!(why.is_some(), warns, "{} = {raw:?}: {why:?}", knob.name);
            if let Some(w) = why {
                assert!(w.contains(knob.name), "the warning names it: {w}");
            }
        }
    }

    #[test]
    fn the_batch_never_outgrows_the_queue() {
        let env = |k: &str| match k {
            "OTEL_BSP_MAX_QUEUE_SIZE" => Some("100000000".to_owned()),
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("100000000".to_owned()),
            "OTEL_BSP_SCHEDULE_DELAY" => Some("100".to_owned()),
            _ => None,
        };
        let (config, warnings) = batch(env);
        let shown = format!("{config:?}");
        assert!(shown.contains("max_queue_size: 16384"), "{shown}");
        assert!(shown.contains("max_export_batch_size: 16384"), "{shown}");
        assert!(shown.contains("scheduled_delay: 100ms"), "{shown}");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let small = |k: &str| (k == "OTEL_BSP_MAX_QUEUE_SIZE").then(|| "64".to_owned());
        let shown = format!("{:?}", batch(small).0);
        assert!(shown.contains("max_export_batch_size: 64"), "{shown}");
    }

    #[test]
    fn an_instance_id_is_a_new_uuid() {
        let (a, b) = (instance_id(), instance_id());
        assert_ne!(a, b);
        let parts: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{a}");
        assert_eq!(&a[14..15], "4", "version 4: {a}");
    }
}
