//! The AWS SDK's configuration for every client sequence-guard builds (the
//! projector's, the dispatcher's, the tools'): the environment's, on the
//! TLS the crate's features choose.
//!
//! | feature | TLS | key exchange offered first | FIPS build |
//! | --- | --- | --- | --- |
//! | `tls-aws-lc` (default) | the SDK's own HTTPS client: rustls on aws-lc-rs | X25519MLKEM768 (post-quantum hybrid) | yes (aws-lc-fips) |
//! | `tls-ring` | rustls on ring | X25519 (classical only) | no |
//!
//! With both on, aws-lc-rs is used. docs/performance.md (the cold start)
//! has the figures and why aws-lc-rs, built without its CPU jitter entropy
//! source, is the default.

#[cfg(not(any(feature = "tls-aws-lc", feature = "tls-ring")))]
compile_error!(
    "sequence-guard needs a TLS provider for its AWS clients: the feature `tls-aws-lc` (default) or `tls-ring`"
);

/// `aws_config::from_env()`, with the HTTPS client of the features: what
/// every SDK client of sequence-guard is built from.
pub fn from_env() -> aws_config::ConfigLoader {
    let loader = aws_config::from_env();
    #[cfg(all(feature = "tls-ring", not(feature = "tls-aws-lc")))]
    let loader = loader.http_client(ring::https_client());
    loader
}

#[cfg(all(feature = "tls-ring", not(feature = "tls-aws-lc")))]
mod ring {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::Provider;
    use aws_smithy_http_client::tls::rustls_provider::CryptoMode;
    use aws_smithy_http_client::{Builder, ConnectorBuilder};

    /// The HTTPS client on rustls and ring, built as the SDK builds its
    /// default one on aws-lc-rs: each client's connector settings and
    /// sleep, the proxy from the environment (`HTTPS_PROXY`, `NO_PROXY`).
    pub(super) fn https_client() -> aws_sdk_dynamodb::config::SharedHttpClient {
        Builder::new().build_with_connector_fn(|settings, components| {
            let mut connector =
                ConnectorBuilder::default().tls_provider(Provider::Rustls(CryptoMode::Ring));
            connector.set_connector_settings(settings.cloned());
            if let Some(components) = components {
                connector.set_sleep_impl(components.sleep_impl());
            }
            connector.set_proxy_config(Some(ProxyConfig::from_env()));
            connector.build()
        })
    }
}
