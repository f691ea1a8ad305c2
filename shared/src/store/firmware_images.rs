//! The firmware image bucket (issue 40), through the AWS SDK for S3: presigned PUT (upload) and
//! GET (download, Range-capable), and the service's own check of a stored image (size and
//! SHA-256 computed from its bytes, never the uploader's word). The bucket comes from
//! `FIRMWARE_BUCKET` (set from the bucket's `Ref` in `template.yaml`); the endpoint from the
//! SDK's standard `AWS_ENDPOINT_URL_S3` (moto's server locally), so any S3-compatible server
//! stands in.

use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::Client;
use sha2::{Digest, Sha256};

use crate::model::error::FleetError;

/// Environment variable naming the bucket.
pub const FIRMWARE_BUCKET_ENV: &str = "FIRMWARE_BUCKET";

/// The firmware image bucket and the client that reaches it.
#[derive(Clone, Debug)]
pub struct FirmwareImages {
    /// SDK client.
    pub client: Client,
    /// Bucket name.
    pub bucket: String,
}

/// What the service found reading a stored image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredImage {
    /// No object under the key (not uploaded yet).
    Missing,
    /// Larger than `limit` bytes: not read to the end (its hash would be of no use).
    TooLarge {
        /// The size S3 reports.
        size: u64,
    },
    /// Read to the end.
    Read {
        /// Bytes read.
        size: u64,
        /// SHA-256 of those bytes, lowercase hex.
        sha256: String,
        /// The object version read (a versioned bucket), if S3 gave one.
        version: Option<String>,
    },
}

impl FirmwareImages {
    /// A handle on `bucket` through `client`.
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }

    /// The bucket from `FIRMWARE_BUCKET`, the client from the SDK's environment (region,
    /// credentials, `AWS_ENDPOINT_URL_S3`). An endpoint other than AWS's is addressed
    /// path-style (`{endpoint}/{bucket}/{key}`), as local servers need.
    pub async fn from_env() -> Result<Self, FleetError> {
        let bucket = std::env::var(FIRMWARE_BUCKET_ENV)
            .map_err(|_| FleetError::internal(format!("{FIRMWARE_BUCKET_ENV} is not set")))?;
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let custom_endpoint = std::env::var("AWS_ENDPOINT_URL_S3")
            .is_ok_and(|endpoint| !endpoint.contains(".amazonaws.com"));
        let config = aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(custom_endpoint)
            .build();
        Ok(Self::new(Client::from_conf(config), bucket))
    }

    /// A presigned PUT of `key`, valid `expires` long.
    pub async fn upload_url(&self, key: &str, expires: Duration) -> Result<String, FleetError> {
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .presigned(PresigningConfig::expires_in(expires).map_err(FleetError::internal)?)
            .await
            .map_err(|e| FleetError::internal(format!("presigning an upload: {e}")))?;
        Ok(request.uri().to_string())
    }

    /// A presigned GET of `key` (of its `version`, when given), valid `expires` long (S3
    /// serves `Range` on it, so a download resumes).
    pub async fn download_url(
        &self,
        key: &str,
        version: Option<&str>,
        expires: Duration,
    ) -> Result<String, FleetError> {
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version.map(str::to_string))
            .presigned(PresigningConfig::expires_in(expires).map_err(FleetError::internal)?)
            .await
            .map_err(|e| FleetError::internal(format!("presigning a download: {e}")))?;
        Ok(request.uri().to_string())
    }

    /// Reads the object at `key` and hashes it, if it is there and at most `limit` bytes (a
    /// HEAD first, so an oversized or missing image costs no download).
    pub async fn read_and_hash(&self, key: &str, limit: u64) -> Result<StoredImage, FleetError> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let size = match head {
            Ok(head) => head.content_length().unwrap_or(0).max(0) as u64,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => {
                return Ok(StoredImage::Missing)
            }
            Err(e) => {
                return Err(FleetError::internal(format!(
                    "reading an image's size: {e}"
                )))
            }
        };
        if size > limit {
            return Ok(StoredImage::TooLarge { size });
        }
        let object = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let (mut body, version) = match object {
            Ok(object) => (object.body, object.version_id),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Ok(StoredImage::Missing)
            }
            Err(e) => return Err(FleetError::internal(format!("reading an image: {e}"))),
        };
        let mut hasher = Sha256::new();
        let mut read = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| FleetError::internal(format!("reading an image: {e}")))?
        {
            read += chunk.len() as u64;
            // Replaced while being read: stop at the limit rather than hash without end.
            if read > limit {
                return Ok(StoredImage::TooLarge { size: read });
            }
            hasher.update(&chunk);
        }
        let sha256 = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(StoredImage::Read {
            size: read,
            sha256,
            version,
        })
    }

    /// Deletes the object at `key` (its current version: the bucket is versioned, and its
    /// lifecycle expires the noncurrent one).
    pub async fn delete(&self, key: &str) -> Result<(), FleetError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| FleetError::internal(format!("deleting an image: {e}")))?;
        Ok(())
    }
}
