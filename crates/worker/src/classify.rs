//! Error classification by the words providers and CLIs actually print
//! (see the error tables in the worker CLI reference). The class decides what the
//! scheduler does: auth and billing need a person, a rate limit needs time, network
//! and other failures are retried.

use super::protocol::ErrorClass;

const AUTH: &[&str] = &[
    "not logged in",
    "please run /login",
    "authentication_failed",
    "authentication_error",
    "authentication required",
    "invalid api key",
    "invalid x-api-key",
    "incorrect api key",
    "api key not valid",
    "api_key_invalid",
    "invalid_api_key",
    "unauthorized",
    "status 401",
    "permission_error",
    "please set an auth method",
    "invalid auth method",
    "missing environment variable",
    "no credentials",
    "oauth_org_not_allowed",
];

const BILLING: &[&str] = &[
    "credit balance is too low",
    "billing_error",
    "billing",
    "insufficient_quota",
    "quota exceeded",
    "exhausted your daily quota",
    "exceeded your current quota",
    "payment required",
];

const RATE: &[&str] = &[
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "(429)",
    "status 429",
    "code 429",
    "resource_exhausted",
    "resource exhausted",
    "overloaded",
];

/// A quota that refills within minutes is a rate limit, not a billing problem
/// (Google: `Quota exceeded for quota metric '… per minute'`).
const SHORT_QUOTA: &[&str] = &["per minute", "per second", "retry in", "retrydelay"];

const NETWORK: &[&str] = &[
    "cannot connect",
    "connection refused",
    "connection reset",
    "could not resolve",
    "dns error",
    "network",
    "econnrefused",
    "enotfound",
    "etimedout",
    "timed out",
    "error sending request",
    "waiting for network",
];

/// The class of an error message; billing is checked before rate limits because a
/// quota error often arrives as HTTP 429.
pub fn classify(message: &str) -> ErrorClass {
    let m = message.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| m.contains(w));
    if has(BILLING) && has(SHORT_QUOTA) {
        ErrorClass::RateLimit
    } else if has(BILLING) {
        ErrorClass::BillingQuota
    } else if has(AUTH) {
        ErrorClass::Auth
    } else if has(RATE) {
        ErrorClass::RateLimit
    } else if has(NETWORK) {
        ErrorClass::Network
    } else {
        ErrorClass::Other
    }
}

/// The class for an HTTP status from a provider, refined by its body.
pub fn classify_status(status: u16, body: &str) -> ErrorClass {
    match classify(body) {
        ErrorClass::Other | ErrorClass::Network => match status {
            401 | 403 => ErrorClass::Auth,
            402 => ErrorClass::BillingQuota,
            429 | 529 | 503 => ErrorClass::RateLimit,
            _ => ErrorClass::Other,
        },
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_each_cli_prints() {
        use ErrorClass::*;
        let cases = [
            ("Not logged in · Please run /login", Auth),
            ("Invalid API key · Fix external API key", Auth),
            (
                "API Error: Request rejected (429) · This request would exceed your account's rate limit.",
                RateLimit,
            ),
            (
                "unexpected status 401 Unauthorized: Incorrect API key provided",
                Auth,
            ),
            (
                "Quota exceeded. Check your plan and billing details.",
                BillingQuota,
            ),
            (
                "Please set an Auth method in your ~/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY",
                Auth,
            ),
            (
                "[API Error: You have exhausted your daily quota on this model.]",
                BillingQuota,
            ),
            (
                "Your credit balance is too low to access the Anthropic API",
                BillingQuota,
            ),
            (
                "[API Error: {\"error\":{\"code\":429,\"message\":\"Resource has been exhausted (e.g. check quota).\",\"status\":\"RESOURCE_EXHAUSTED\"}}]",
                RateLimit,
            ),
            (
                "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent request limit per minute'",
                RateLimit,
            ),
            ("Cannot connect to API: ECONNREFUSED", Network),
            ("Reconnecting... waiting for network", Network),
            ("the model said something odd", Other),
        ];
        for (text, class) in cases {
            assert_eq!(classify(text), class, "{text}");
        }
        assert_eq!(
            classify_status(429, "{\"error\":{\"type\":\"rate_limit_error\"}}"),
            RateLimit
        );
        assert_eq!(
            classify_status(429, "{\"error\":{\"code\":\"insufficient_quota\"}}"),
            BillingQuota
        );
        assert_eq!(classify_status(403, "forbidden"), Auth);
        assert_eq!(classify_status(500, "boom"), Other);
    }
}
