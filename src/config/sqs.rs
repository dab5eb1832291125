//! The `[sqs]` table: the SQS front end's settings (the front end reads
//! them; they live here so the configuration imports no front end).

use std::collections::BTreeMap;

use serde::Deserialize;

/// The `[sqs]` table of the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SqsSection {
    /// Serve the SQS API on the API listener.
    pub enabled: bool,
    /// The account id in queue URLs and ARNs (12 digits).
    pub account: String,
    /// The region in ARNs.
    pub region: String,
    /// The base of queue URLs (`http://host:port`); unset: from each
    /// request's `Host` header.
    pub base_url: Option<String>,
    /// Access key ids and their secret keys; requests must be signed by one.
    pub credentials: BTreeMap<String, String>,
    /// With a `token` configured, the access key id whose secret it is.
    pub token_access_key_id: String,
}

impl Default for SqsSection {
    fn default() -> Self {
        SqsSection {
            enabled: true,
            account: "000000000000".into(),
            region: "us-east-1".into(),
            base_url: None,
            credentials: BTreeMap::new(),
            token_access_key_id: "hotq".into(),
        }
    }
}

impl SqsSection {
    /// Checks values no type can check.
    pub fn validate(&self) -> Result<(), String> {
        if self.account.len() != 12 || !self.account.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "sqs.account must be 12 digits, got {:?}",
                self.account
            ));
        }
        if self.region.is_empty() || self.region.contains(['/', ':']) {
            return Err(format!("sqs.region {:?} is not a region name", self.region));
        }
        if let Some((id, _)) = self
            .credentials
            .iter()
            .find(|(id, secret)| id.is_empty() || secret.is_empty())
        {
            return Err(format!(
                "sqs.credentials: access key id {id:?} needs a non-empty id and secret"
            ));
        }
        if self.token_access_key_id.is_empty() {
            return Err("sqs.token_access_key_id must not be empty".into());
        }
        Ok(())
    }
}
