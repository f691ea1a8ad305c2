//! moto's server (issues 40 and 41) serves the S3 and SQS APIs to the AWS SDK for Rust as AWS
//! does: what firmware images (presigned PUT, Range downloads) and webhook deliveries (a queue)
//! rely on, with no mock of the SDK.

use std::time::Duration;

use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::presigning::PresigningConfig;
use fleet_testkit::moto_server::MotoServer;

fn s3_client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("local", "local", None, None, "moto"))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_sqs::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "local", "local", None, None, "moto",
        ))
        .endpoint_url(endpoint)
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

#[tokio::test]
async fn moto_serves_presigned_uploads_and_range_downloads_of_s3() {
    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let s3 = s3_client(moto.endpoint());
    s3.create_bucket().bucket("images").send().await.unwrap();
    let http = reqwest::Client::new();

    let put = s3
        .put_object()
        .bucket("images")
        .key("fw/1")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300)).unwrap())
        .await
        .unwrap();
    let body: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    let answer = http.put(put.uri()).body(body.clone()).send().await.unwrap();
    assert_eq!(answer.status(), 200, "presigned PUT");

    let head = s3
        .head_object()
        .bucket("images")
        .key("fw/1")
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_length(), Some(10_000));

    let get = s3
        .get_object()
        .bucket("images")
        .key("fw/1")
        .presigned(PresigningConfig::expires_in(Duration::from_secs(300)).unwrap())
        .await
        .unwrap();
    let part = http
        .get(get.uri())
        .header("range", "bytes=9000-")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), 206, "a resumed download gets the rest");
    assert_eq!(part.bytes().await.unwrap().as_ref(), &body[9000..]);
}

#[tokio::test]
async fn moto_serves_an_sqs_queue() {
    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let sqs = sqs_client(moto.endpoint());
    let queue = sqs
        .create_queue()
        .queue_name("deliveries")
        .send()
        .await
        .unwrap();
    let url = queue.queue_url().unwrap().to_owned();
    sqs.send_message()
        .queue_url(&url)
        .message_body("{\"deliveryId\":\"d-1\"}")
        .send()
        .await
        .unwrap();
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let bodies: Vec<_> = received
        .messages()
        .iter()
        .filter_map(|m| m.body())
        .collect();
    assert_eq!(bodies, ["{\"deliveryId\":\"d-1\"}"]);
}
