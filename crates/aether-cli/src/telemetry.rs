//! OpenTelemetry for the commands that serve calls (`serve`, `mcp-serve`, `agent run`): each
//! call's spans (made by the pipeline, `aether_pipeline::spans`) are batched and exported
//! over OTLP, HTTP/protobuf or gRPC, to the endpoint `[telemetry]` or the standard `OTEL_*`
//! variables name. With neither, no tracer is made and calls pay nothing for it.
//!
//! Configuration follows the OpenTelemetry SDK's rules: what `aether.toml` says wins over the
//! environment; `OTEL_EXPORTER_OTLP_HEADERS` adds headers (keep an API key there rather than
//! in the file); `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER`, `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES` are read by the SDK itself; `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none` turn traces off.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aether_policy::config::TelemetrySection;
use anyhow::{Context, Result, bail};
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};

/// The provider this process exports with, once started.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Exports until closed (or dropped, on an early error).
pub struct Telemetry {
    on: bool,
}

impl Telemetry {
    /// Sends the spans still queued, for up to 5 s. The runtime keeps running meanwhile: the
    /// gRPC exporter's connection lives on it (and `mcp-serve`'s runtime has one thread).
    pub async fn close(mut self) {
        if !std::mem::take(&mut self.on) {
            return;
        }
        let Some(provider) = PROVIDER.get().cloned() else {
            return;
        };
        let flushed = tokio::task::spawn_blocking(move || {
            provider.shutdown_with_timeout(Duration::from_secs(5))
        })
        .await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }
}

impl Drop for Telemetry {
    /// An early return: what is queued gets a second to leave.
    fn drop(&mut self) {
        if self.on
            && let Some(provider) = PROVIDER.get()
        {
            let _ = provider.shutdown_with_timeout(Duration::from_secs(1));
        }
    }
}

/// Where traces go, resolved from `[telemetry]` and the environment.
#[derive(Debug, PartialEq)]
struct Target {
    /// `None`: the exporter reads `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` itself.
    endpoint: Option<String>,
    grpc: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether traces are wanted, and where: `None` when no endpoint is configured anywhere, or
/// the environment turns traces off.
fn target(section: &TelemetrySection) -> Result<Option<Target>> {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return Ok(None);
    }
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    if section.endpoint.is_none() && !from_env {
        return Ok(None);
    }
    let (protocol, source) = match &section.protocol {
        Some(p) => (p.clone(), "telemetry.protocol"),
        None => match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(p) => (p, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            None => match env("OTEL_EXPORTER_OTLP_PROTOCOL") {
                Some(p) => (p, "OTEL_EXPORTER_OTLP_PROTOCOL"),
                None => ("http/protobuf".into(), ""),
            },
        },
    };
    let grpc = match protocol.as_str() {
        "grpc" => true,
        "http/protobuf" => false,
        other => {
            bail!("{source} is {other:?}: Aether exports traces over \"http/protobuf\" or \"grpc\"")
        }
    };
    // `[telemetry] endpoint` is a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: over HTTP the
    // traces' path is added to it.
    let endpoint = section.endpoint.as_ref().map(|e| {
        if grpc {
            e.clone()
        } else {
            format!("{}/v1/traces", e.trim_end_matches('/'))
        }
    });
    Ok(Some(Target { endpoint, grpc }))
}

/// Starts exporting, if `[telemetry]` or the environment asks for it. Call inside the Tokio
/// runtime (the gRPC exporter's connection lives on it), before the pipeline is built.
pub fn start(section: &TelemetrySection) -> Result<Telemetry> {
    let Some(target) = target(section)? else {
        return Ok(Telemetry { on: false });
    };
    // Both exporters' TLS is rustls with the process's crypto (ring).
    aether_net::install_tls();
    let timeout = Duration::from_secs(10);
    let exporter = if target.grpc {
        let mut headers = http::HeaderMap::new();
        for (name, value) in &section.headers {
            let name = http::HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
                .with_context(|| format!("telemetry.headers: {name:?} is not a header name"))?;
            let value = http::HeaderValue::from_str(value)
                .with_context(|| format!("telemetry.headers.{name}: not a valid value"))?;
            headers.insert(name, value);
        }
        let metadata =
            opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers);
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_timeout(timeout)
            .with_metadata(metadata);
        if let Some(endpoint) = &target.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        builder.build()
    } else {
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(timeout)
            .with_headers(section.headers.clone().into_iter().collect());
        if let Some(endpoint) = &target.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        builder.build()
    }
    .context("cannot set up the OTLP trace exporter")?;
    // Larger batches, sent every second, than the SDK's defaults (2,048 spans queued, sent
    // every 5 s), which a busy server outruns and then drops spans; OTEL_BSP_* still win.
    let batches = BatchConfigBuilder::default()
        .with_max_queue_size(65_536)
        .with_max_export_batch_size(4_096)
        .with_scheduled_delay(Duration::from_secs(1))
        .build();
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        env!("CARGO_PKG_VERSION"),
    ));
    // OTEL_SERVICE_NAME (read by the resource's own detectors) names the service unless
    // the configuration does; without either it is `aether`.
    match &section.service_name {
        Some(name) => resource = resource.with_service_name(name.clone()),
        None if env("OTEL_SERVICE_NAME").is_none() => {
            resource = resource.with_service_name("aether")
        }
        None => {}
    }
    let mut provider = SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batches)
                .build(),
        )
        .with_resource(resource.build());
    if let Some(ratio) = section.sample_ratio {
        provider = provider.with_sampler(Sampler::ParentBased(Box::new(
            Sampler::TraceIdRatioBased(ratio),
        )));
    }
    let provider = provider.build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    let _ = PROVIDER.set(provider);
    tracing::info!(
        protocol = if target.grpc { "grpc" } else { "http/protobuf" },
        endpoint = target
            .endpoint
            .as_deref()
            .unwrap_or("(from OTEL_EXPORTER_OTLP_*)"),
        "exporting traces over OTLP"
    );
    Ok(Telemetry { on: true })
}

/// The tracer each call's spans are made with: `None` unless [`start`] set up an exporter.
pub fn tracer() -> aether_pipeline::spans::SharedTracer {
    PROVIDER.get()?;
    let scope = InstrumentationScope::builder("aether")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    Some(Arc::new(opentelemetry::global::tracer_with_scope(scope)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(endpoint: Option<&str>, protocol: Option<&str>) -> TelemetrySection {
        TelemetrySection {
            endpoint: endpoint.map(String::from),
            protocol: protocol.map(String::from),
            ..Default::default()
        }
    }

    // The environment is the process's: these cases read it only where no OTEL_* is set
    // (cargo test does not set any).
    #[test]
    fn the_configured_endpoint_is_a_base_url_over_http_and_as_given_over_grpc() {
        if std::env::vars().any(|(k, _)| k.starts_with("OTEL_")) {
            return;
        }
        assert_eq!(target(&section(None, None)).unwrap(), None);
        assert_eq!(
            target(&section(Some("http://127.0.0.1:4318/"), None)).unwrap(),
            Some(Target {
                endpoint: Some("http://127.0.0.1:4318/v1/traces".into()),
                grpc: false
            })
        );
        assert_eq!(
            target(&section(Some("http://127.0.0.1:4317"), Some("grpc"))).unwrap(),
            Some(Target {
                endpoint: Some("http://127.0.0.1:4317".into()),
                grpc: true
            })
        );
        let e = target(&section(Some("http://x:1"), Some("http/json"))).unwrap_err();
        assert!(e.to_string().contains("telemetry.protocol"), "{e}");
    }
}
