//! Delegated authentication and authorization, as kube-controller-manager's secure port does
//! them (k8s.io/apiserver's delegating authenticator and authorizer).
//!
//! A request's bearer token goes to the API server in a TokenReview; the user it names, with
//! the request's path and verb (non-resource attributes: `get` for a GET), in a
//! SubjectAccessReview. Both answers are cached for 10 s, as upstream caches them
//! (`--authentication-token-webhook-cache-ttl`, the authorizer's allow and deny TTLs). Paths in
//! `--authorization-always-allow-paths` skip both.
//!
//! The answers: no token, or one the API server does not authenticate, 401; a user without the
//! permission, 403 naming the user and path; an API server that cannot answer, 401 when
//! authenticating and 500 when authorizing, as upstream's filters answer. Nothing is allowed on
//! an error.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use lru::LruCache;

/// How long a TokenReview's or a SubjectAccessReview's answer is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// The longest bearer token reviewed: service account tokens and OIDC ID tokens are a few KiB.
/// Longer ones are refused unreviewed, so that the token cache (keyed by the token) holds at
/// most `CACHE_SIZE` times this.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest path authorized: the routes' paths are short; the decision cache is keyed by it.
const MAX_PATH_BYTES: usize = 4 * 1024;
/// Reviews (TokenReview, SubjectAccessReview) in flight at once, and how long a request waits
/// for one before it is answered 429: a flood of new tokens must not become a flood of calls
/// competing with the collector's own for its API budget and priority level.
const MAX_REVIEWS_IN_FLIGHT: usize = 32;
const REVIEW_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// Most answers of each kind kept.
const CACHE_SIZE: usize = 1024;

/// Who a token authenticates as.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name (`system:serviceaccount:NAMESPACE:NAME` for a ServiceAccount).
    pub name: String,
    /// The user's UID, if any.
    pub uid: Option<String>,
    /// The user's groups.
    pub groups: Vec<String>,
    /// Extra attributes, passed on to the SubjectAccessReview.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Whether a path skips authentication and authorization: the `--authorization-always-allow-paths`
/// entries, each an exact path or a prefix ending in `*`, as upstream matches them.
#[derive(Clone, Debug, Default)]
pub struct AlwaysAllow(Vec<String>);

impl AlwaysAllow {
    /// The rules of `paths` (empty entries ignored).
    pub fn new(paths: &[String]) -> AlwaysAllow {
        AlwaysAllow(paths.iter().map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect())
    }

    /// The rules, as given (trimmed, empty entries left out).
    pub fn rules(&self) -> &[String] {
        &self.0
    }

    /// Whether `path` is always allowed.
    pub fn matches(&self, path: &str) -> bool {
        self.0.iter().any(|rule| match rule.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == rule,
        })
    }
}

/// The bearer token of an `Authorization` header value (`Bearer TOKEN`, the scheme in any
/// case), if it carries one.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let mut parts = authorization.split_whitespace();
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && parts.next().is_none()).then_some(token)
}

/// A SubjectAccessReview's question: the whole user, the verb and the path.
type Question = (User, String, String);

/// The authenticator and authorizer of the secure port (see the module docs).
pub struct DelegatedAuth {
    client: kube::Client,
    always_allow: AlwaysAllow,
    tokens: Mutex<LruCache<String, (Instant, Option<User>)>>,
    decisions: Mutex<LruCache<Question, (Instant, bool)>>,
    reviews: tokio::sync::Semaphore,
}

impl std::fmt::Debug for DelegatedAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuth").field("always_allow", &self.always_allow).finish()
    }
}

impl DelegatedAuth {
    /// Reviews through `client`'s API server; `always_allow` skips both steps.
    pub fn new(client: kube::Client, always_allow: AlwaysAllow) -> DelegatedAuth {
        let size = NonZeroUsize::new(CACHE_SIZE).expect("non-zero");
        DelegatedAuth {
            client,
            always_allow,
            tokens: Mutex::new(LruCache::new(size)),
            decisions: Mutex::new(LruCache::new(size)),
            reviews: tokio::sync::Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
        }
    }

    /// Who `token` authenticates as (`None`: not authenticated); an error when the API server
    /// could not say.
    pub async fn authenticate(&self, token: &str) -> Result<Option<User>, kube::Error> {
        if let Some((at, user)) = self.tokens.lock().expect("token cache").get(token) {
            if at.elapsed() < CACHE_TTL {
                return Ok(user.clone());
            }
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), audiences: None },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let user =
            answer.status.filter(|s| s.authenticated == Some(true)).and_then(|s| s.user).and_then(
                |u| {
                    Some(User {
                        name: u.username.filter(|n| !n.is_empty())?,
                        uid: u.uid.filter(|n| !n.is_empty()),
                        groups: u.groups.unwrap_or_default(),
                        extra: u.extra.unwrap_or_default(),
                    })
                },
            );
        self.tokens
            .lock()
            .expect("token cache")
            .put(token.to_owned(), (Instant::now(), user.clone()));
        Ok(user)
    }

    /// Whether `user` may `verb` the non-resource `path`; an error when the API server could
    /// not say.
    pub async fn authorize(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> Result<bool, kube::Error> {
        let question = (user.clone(), verb.to_owned(), path.to_owned());
        if let Some((at, allowed)) = self.decisions.lock().expect("decision cache").get(&question) {
            if at.elapsed() < CACHE_TTL {
                return Ok(*allowed);
            }
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some(verb.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let allowed = answer.status.is_some_and(|s| s.allowed && s.denied != Some(true));
        self.decisions.lock().expect("decision cache").put(question, (Instant::now(), allowed));
        Ok(allowed)
    }
}

/// The axum middleware that guards every route but the always-allowed paths.
pub async fn guard(
    State(auth): State<Arc<DelegatedAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    if auth.always_allow.matches(&path) {
        return next.run(request).await;
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .map(str::to_owned);
    let Some(token) = token else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized: no bearer token\n").into_response();
    };
    if token.len() > MAX_TOKEN_BYTES {
        return (StatusCode::UNAUTHORIZED, "Unauthorized: token too long\n").into_response();
    }
    if path.len() > MAX_PATH_BYTES {
        return (StatusCode::URI_TOO_LONG, "URI Too Long\n").into_response();
    }
    // Held for both reviews, not for the request they let through.
    let Ok(Ok(review)) = tokio::time::timeout(REVIEW_WAIT, auth.reviews.acquire()).await else {
        return (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests: reviews busy\n")
            .into_response();
    };
    let user = match auth.authenticate(&token).await {
        Ok(Some(user)) => user,
        Ok(None) => return (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "secure port: TokenReview failed");
            return (StatusCode::UNAUTHORIZED, "Unauthorized: the token could not be reviewed\n")
                .into_response();
        }
    };
    let verb = request.method().as_str().to_ascii_lowercase();
    let decision = auth.authorize(&user, &verb, &path).await;
    drop(review);
    match decision {
        Ok(true) => next.run(request).await,
        Ok(false) => (
            StatusCode::FORBIDDEN,
            format!("forbidden: User {:?} cannot {verb} path {path:?}\n", user.name),
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "secure port: SubjectAccessReview failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error: authorization failed\n")
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allow_matches_exact_paths_and_star_prefixes() {
        let rules = AlwaysAllow::new(&["/healthz".into(), " /debug/pprof/* ".into(), "".into()]);
        assert!(rules.matches("/healthz"));
        assert!(!rules.matches("/healthz/extra"), "exact without a star");
        assert!(!rules.matches("/healthzz"));
        assert!(rules.matches("/debug/pprof/heap"));
        assert!(rules.matches("/debug/pprof/"));
        assert!(!rules.matches("/debug/pprof"), "the prefix includes its slash");
        assert!(!rules.matches("/metrics"));
        assert!(!AlwaysAllow::new(&[]).matches("/"), "nothing by default when empty");
    }

    #[test]
    fn bearer_tokens_parse_as_upstream_parses_them() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER   abc  "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer a b"), None);
        assert_eq!(bearer_token(""), None);
    }
}
