//! The dev server's local AWS beside DynamoDB Local: moto's server (PyPI, `make moto-server`)
//! as SQS for webhook deliveries and S3 for firmware images, found by the functions exactly as
//! on AWS, through `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL_S3`, `WEBHOOK_QUEUE_URL` and
//! `FIRMWARE_BUCKET`; and the delivery queue's event source: [`deliver_webhooks`] hands each
//! batch to the delivery worker as Lambda's SQS event source mapping would.

use std::sync::Arc;
use std::time::Duration;

use fleet_testkit::moto_server::{
    allow_browser_uploads, create_versioned_bucket, local_firmware_images, MotoServer,
};
use fleet_testkit::webhook_queue::{create_queue, pump, sqs_client};
use shared::ops::webhooks::{DeliveryQueue, QUEUE_URL_ENV};
use webhooks::worker::DeliveryWorker;

/// The queue's name on the local server.
const QUEUE_NAME: &str = "webhook-deliveries";
/// The image bucket's name on the local server.
const BUCKET_NAME: &str = "device-fleet-firmware-dev";

/// moto's server, running until dropped, and the delivery queue on it.
pub struct LocalAws {
    /// The server (stops when dropped).
    pub moto: MotoServer,
    /// The webhook delivery queue.
    pub queue: DeliveryQueue,
}

/// Starts moto's server, creates the queue and the versioned bucket on it (browsers on this
/// machine may PUT to it: the console's image uploads), and points this
/// process's environment at them (before the functions are built: they read it then).
pub async fn start_local_aws() -> Result<LocalAws, String> {
    let moto = MotoServer::start_default().map_err(|e| format!("moto's server: {e}"))?;
    let queue = create_queue(&sqs_client(moto.endpoint()), QUEUE_NAME)
        .await
        .map_err(|e| format!("creating the delivery queue: {e:?}"))?;
    let images = local_firmware_images(moto.endpoint(), BUCKET_NAME);
    create_versioned_bucket(&images).await?;
    // The console (on 127.0.0.1 at any port) uploads images with presigned PUTs.
    allow_browser_uploads(&images, &["http://127.0.0.1:*", "http://localhost:*"]).await?;
    std::env::set_var("AWS_ENDPOINT_URL_SQS", moto.endpoint());
    std::env::set_var("AWS_ENDPOINT_URL_S3", moto.endpoint());
    std::env::set_var(QUEUE_URL_ENV, queue.url());
    std::env::set_var(
        shared::store::firmware_images::FIRMWARE_BUCKET_ENV,
        BUCKET_NAME,
    );
    Ok(LocalAws { moto, queue })
}

/// The delivery worker on `table` and `aws`'s queue, under the environment's target policy
/// and retry schedule, with its queue's event source running ([`deliver_webhooks`]): what
/// `fleet-dev serve` hands the stream's alarm records to.
pub fn start_deliveries(
    table: &shared::FleetTable,
    aws: &LocalAws,
) -> Result<Arc<DeliveryWorker>, shared::FleetError> {
    let worker = Arc::new(DeliveryWorker::new(
        table.clone(),
        aws.queue.clone(),
        shared::model::webhook::target::TargetPolicy::from_env(),
        shared::ops::webhooks::deliveries::RetrySchedule::from_env(),
    )?);
    tokio::spawn(deliver_webhooks(worker.clone(), aws.queue.clone()));
    Ok(worker)
}

/// Runs until the process ends: receives the queue's messages and delivers them through
/// `worker` (long polls of a second, so a delivery leaves within about a second).
pub async fn deliver_webhooks(worker: Arc<DeliveryWorker>, queue: DeliveryQueue) {
    loop {
        if let Err(err) = pump(&worker, &queue, 1).await {
            tracing::warn!(error = %err, "the webhook delivery queue could not be read");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
