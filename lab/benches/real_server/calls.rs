//! API calls by verb, counted by the server itself: `apiserver_request_total` before and after a
//! run. The same count for both collectors, with no cooperation from either.

use std::collections::BTreeMap;

use kube::Client;

/// Resources the apiserver's own loops touch on their own (API priority and fairness, leases,
/// endpoints): left out so the counts are the collector's.
const SERVER_OWN: &[&str] =
    &["flowschemas", "prioritylevelconfigurations", "leases", "endpoints", "endpointslices"];

/// Verbs reported, in this order.
pub const VERBS: &[&str] = &["GET", "LIST", "PATCH", "PUT", "DELETE"];

/// `apiserver_request_total` summed by verb.
#[derive(Clone, Debug, Default)]
pub struct Calls(pub BTreeMap<String, u64>);

impl Calls {
    /// Reads the server's counters now.
    pub async fn scrape(client: &Client) -> anyhow::Result<Calls> {
        let req = http::Request::get("/metrics").body(Vec::new())?;
        let text = client.request_text(req).await?;
        Ok(Calls::parse(&text))
    }

    fn parse(text: &str) -> Calls {
        let mut by_verb = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let label = |name: &str| {
                let key = format!("{name}=\"");
                labels.split_once(&key).and_then(|(_, rest)| rest.split_once('"')).map(|(v, _)| v)
            };
            if label("resource").is_some_and(|r| SERVER_OWN.contains(&r)) {
                continue;
            }
            let (Some(verb), Ok(value)) = (label("verb"), value.parse::<f64>()) else { continue };
            *by_verb.entry(verb.to_owned()).or_insert(0) += value as u64;
        }
        Calls(by_verb)
    }

    /// `self - before`, verb by verb.
    pub fn since(&self, before: &Calls) -> Calls {
        Calls(
            self.0
                .iter()
                .map(|(verb, n)| (verb.clone(), n - before.0.get(verb).copied().unwrap_or(0)))
                .collect(),
        )
    }

    /// Calls of `verb`.
    pub fn get(&self, verb: &str) -> u64 {
        self.0.get(verb).copied().unwrap_or(0)
    }

    /// Calls of every reported verb.
    pub fn total(&self) -> u64 {
        VERBS.iter().map(|v| self.get(v)).sum()
    }

    /// Removes `n` calls of `verb` (the benchmark's own).
    pub fn subtract(&mut self, verb: &str, n: u64) {
        if let Some(c) = self.0.get_mut(verb) {
            *c = c.saturating_sub(n);
        }
    }
}
