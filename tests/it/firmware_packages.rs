//! Firmware packages (issue 40) end to end on DynamoDB Local and moto's S3: an image uploaded
//! through the presigned URL becomes `ready` only once the service has read it and found the
//! declared size and SHA-256 (and, with a signing key, a signature that verifies over the
//! digest); bytes that do not match are `rejected` and never `ready`; another owner's package
//! is a 404; bad input is a 400 naming the field with the table unchanged; each route's
//! DynamoDB requests are within its budget (AP-F1 to AP-F5 of the catalog).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ed25519_dalek::{Signer, SigningKey};
use firmware::FirmwareState;
use fleet_testkit::moto_server::{create_versioned_bucket, local_firmware_images, MotoServer};
use fleet_tests::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use shared::model::pattern_id::PatternId;
use shared::store::firmware_images::StoredImage;

const ALICE: &str = "user-alice";
const BOB: &str = "user-bob";

/// A fresh table and a versioned bucket on a moto server (kept alive by the returned handle).
async fn setup() -> (FirmwareState, MotoServer) {
    let moto = MotoServer::start_default().expect("moto's server (make moto-server)");
    let images = local_firmware_images(moto.endpoint(), "firmware-images");
    create_versioned_bucket(&images).await.unwrap();
    let state = FirmwareState {
        table: fresh_table().await,
        images,
    };
    (state, moto)
}

async fn send(state: &FirmwareState, request: ApiRequest) -> Answer {
    let (response, used) = metered(Box::pin(
        gateway(firmware::router(state.clone())).handle(request.build()),
    ))
    .await;
    answer(response, used)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn image(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Creates a package of `owner` declaring `body`; asserts 201 and returns the answer's body.
async fn create(state: &FirmwareState, owner: &str, body: Value) -> Value {
    let a = send(
        state,
        ApiRequest::post("/me/firmware").caller(owner).json(body),
    )
    .await;
    assert_eq!(a.status, 201, "{:?}", a.body);
    spent(PatternId::CreateFirmware, &a.used, 2);
    assert_eq!(a.body["status"], "pending");
    assert!(a.body["firmwareId"].is_string());
    a.body
}

/// Uploads `bytes` through the package's presigned URL.
async fn upload(created: &Value, bytes: &[u8]) {
    let url = created["uploadUrl"].as_str().unwrap();
    let put = reqwest::Client::new()
        .put(url)
        .body(bytes.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200, "presigned PUT");
}

async fn get(state: &FirmwareState, owner: &str, id: &str) -> Answer {
    send(
        state,
        ApiRequest::get(&format!("/me/firmware/{id}")).caller(owner),
    )
    .await
}

fn declared(bytes: &[u8]) -> Value {
    json!({
        "deviceType": "thermostat",
        "version": "1.4.0",
        "sha256": sha256_hex(bytes),
        "size": bytes.len(),
    })
}

#[tokio::test]
async fn an_uploaded_image_that_matches_becomes_ready_once_the_service_has_read_it() {
    let (state, _moto) = setup().await;
    let bytes = image(70_000, 1);
    let created = create(&state, ALICE, declared(&bytes)).await;
    let id = created["firmwareId"].as_str().unwrap();

    // Nothing uploaded yet: still pending, one GetItem (S3 found no object).
    let a = get(&state, ALICE, id).await;
    assert_eq!(
        (a.status, a.body["status"].as_str()),
        (200, Some("pending"))
    );
    spent(PatternId::GetFirmware, &a.used, 1);

    upload(&created, &bytes).await;
    let a = get(&state, ALICE, id).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    assert_eq!(a.body["status"], "ready", "{:?}", a.body);
    assert!(a.body["checkedAt"].is_string());
    spent(PatternId::GetFirmware, &a.used, 2);

    // Checked once: later reads are one GetItem and no S3 request.
    let a = get(&state, ALICE, id).await;
    assert_eq!(a.body["status"], "ready");
    spent(PatternId::GetFirmware, &a.used, 1);
}

#[tokio::test]
async fn bytes_that_do_not_match_the_hash_are_rejected_and_never_become_ready() {
    let (state, _moto) = setup().await;
    let bytes = image(4_096, 2);
    let created = create(&state, ALICE, declared(&bytes)).await;
    let id = created["firmwareId"].as_str().unwrap();

    // Same size, other bytes: the client's declared hash is not the image's.
    let mut tampered = bytes.clone();
    tampered[100] ^= 0xff;
    upload(&created, &tampered).await;
    let a = get(&state, ALICE, id).await;
    assert_eq!(a.body["status"], "rejected", "{:?}", a.body);
    assert!(
        a.body["reason"].as_str().unwrap().contains("SHA-256"),
        "{:?}",
        a.body
    );

    // The right bytes uploaded afterwards (the URL is still valid) change nothing.
    upload(&created, &bytes).await;
    let a = get(&state, ALICE, id).await;
    assert_eq!(a.body["status"], "rejected", "{:?}", a.body);
    spent(PatternId::GetFirmware, &a.used, 1);
}

#[tokio::test]
async fn an_image_of_another_size_is_rejected() {
    let (state, _moto) = setup().await;
    let bytes = image(10_000, 3);
    let created = create(&state, ALICE, declared(&bytes)).await;
    let id = created["firmwareId"].as_str().unwrap();
    let mut longer = bytes.clone();
    longer.push(0);
    upload(&created, &longer).await;
    let a = get(&state, ALICE, id).await;
    assert_eq!(a.body["status"], "rejected", "{:?}", a.body);
    assert!(
        a.body["reason"].as_str().unwrap().contains("bytes"),
        "{:?}",
        a.body
    );

    // Shorter, too.
    let created = create(&state, ALICE, declared(&bytes)).await;
    upload(&created, &bytes[..9_999]).await;
    let a = get(&state, ALICE, created["firmwareId"].as_str().unwrap()).await;
    assert_eq!(a.body["status"], "rejected", "{:?}", a.body);
}

#[tokio::test]
async fn with_a_signing_key_only_an_image_whose_signature_verifies_becomes_ready() {
    let (state, _moto) = setup().await;
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let public = STANDARD.encode(key.verifying_key().to_bytes());
    let a = send(
        &state,
        ApiRequest::put("/me/firmware-keys/thermostat")
            .caller(ALICE)
            .json(json!({"publicKey": public})),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    spent(PatternId::SetSigningKey, &a.used, 2);

    let bytes = image(8_192, 4);
    let digest = Sha256::digest(&bytes);

    // No signature while the type has a key: 400, nothing stored.
    let before = table_contents(&state.table).await;
    let a = send(
        &state,
        ApiRequest::post("/me/firmware")
            .caller(ALICE)
            .json(declared(&bytes)),
    )
    .await;
    assert_eq!(a.status, 400, "{:?}", a.body);
    assert_eq!(a.error_field(), "signature");
    assert_eq!(table_contents(&state.table).await, before);

    // Signed by another key: the bytes match, the signature does not verify.
    let other = SigningKey::from_bytes(&[43u8; 32]);
    let mut body = declared(&bytes);
    body["signature"] = json!(STANDARD.encode(other.sign(&digest).to_bytes()));
    let created = create(&state, ALICE, body).await;
    upload(&created, &bytes).await;
    let a = get(&state, ALICE, created["firmwareId"].as_str().unwrap()).await;
    assert_eq!(a.body["status"], "rejected", "{:?}", a.body);
    assert!(
        a.body["reason"].as_str().unwrap().contains("signature"),
        "{:?}",
        a.body
    );

    // Signed by the type's key over the image's digest: ready.
    let mut body = declared(&bytes);
    body["signature"] = json!(STANDARD.encode(key.sign(&digest).to_bytes()));
    let created = create(&state, ALICE, body).await;
    assert_eq!(created["signed"], true);
    upload(&created, &bytes).await;
    let a = get(&state, ALICE, created["firmwareId"].as_str().unwrap()).await;
    assert_eq!(a.body["status"], "ready", "{:?}", a.body);

    // Another device type has no key: no signature needed.
    let mut body = declared(&bytes);
    body["deviceType"] = json!("gateway");
    let created = create(&state, ALICE, body).await;
    assert_eq!(created["signed"], false);
}

#[tokio::test]
async fn another_owners_package_is_a_404_and_delete_removes_the_package_and_its_image() {
    let (state, _moto) = setup().await;
    let bytes = image(2_000, 5);
    let created = create(&state, ALICE, declared(&bytes)).await;
    let id = created["firmwareId"].as_str().unwrap();
    upload(&created, &bytes).await;

    let a = get(&state, BOB, id).await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    let a = send(
        &state,
        ApiRequest::delete(&format!("/me/firmware/{id}")).caller(BOB),
    )
    .await;
    assert_eq!(a.status, 404, "{:?}", a.body);
    let a = send(&state, ApiRequest::get("/me/firmware").caller(BOB)).await;
    assert_eq!(a.body["firmware"], json!([]));
    // A path that is not a firmware id names nothing either.
    let a = get(&state, ALICE, "f-..").await;
    assert_eq!(a.status, 404, "{:?}", a.body);

    let key = format!("firmware/{ALICE}/{id}");
    let a = send(
        &state,
        ApiRequest::delete(&format!("/me/firmware/{id}")).caller(ALICE),
    )
    .await;
    assert_eq!(a.status, 204, "{:?}", a.body);
    spent(PatternId::DeleteFirmware, &a.used, 3);
    assert_eq!(get(&state, ALICE, id).await.status, 404);
    assert_eq!(
        state.images.read_and_hash(&key, 10_000).await.unwrap(),
        StoredImage::Missing,
        "the image is deleted (its noncurrent version is the lifecycle's)"
    );
}

#[tokio::test]
async fn the_list_is_paged_newest_first_and_takes_only_its_own_cursors() {
    let (state, _moto) = setup().await;
    let mut ids = Vec::new();
    for seed in 0..3 {
        let created = create(&state, ALICE, declared(&image(100, seed))).await;
        ids.push(created["firmwareId"].as_str().unwrap().to_string());
        // Ids order by creation millisecond.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    let a = send(
        &state,
        ApiRequest::get("/me/firmware")
            .caller(ALICE)
            .query("limit", "2"),
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    spent(PatternId::ListFirmware, &a.used, 1);
    let first: Vec<_> = a.body["firmware"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["firmwareId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(first, [ids[2].clone(), ids[1].clone()]);
    let cursor = a.body["cursor"].as_str().unwrap().to_string();
    let a = send(
        &state,
        ApiRequest::get("/me/firmware")
            .caller(ALICE)
            .query("limit", "2")
            .query("cursor", &cursor),
    )
    .await;
    assert_eq!(a.body["firmware"][0]["firmwareId"], ids[0].as_str());
    assert_eq!(a.body["firmware"].as_array().unwrap().len(), 1);
    assert!(a.body.get("cursor").is_none(), "{:?}", a.body);

    for (name, value) in [("cursor", "USER#x"), ("limit", "0"), ("limit", "101")] {
        let a = send(
            &state,
            ApiRequest::get("/me/firmware")
                .caller(ALICE)
                .query(name, value),
        )
        .await;
        assert_eq!(a.status, 400, "{name}={value}: {:?}", a.body);
        assert_eq!(a.error_field(), name);
    }
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field_and_the_table_is_unchanged() {
    let (state, _moto) = setup().await;
    let good = declared(&image(10, 9));
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("deviceType", json!("a#b")), "deviceType"),
        (with("deviceType", json!("")), "deviceType"),
        (with("version", json!("1.2")), "version"),
        (with("version", json!("v1.2.3")), "version"),
        (
            with("version", json!(format!("1.2.3-{}", "a".repeat(70)))),
            "version",
        ),
        (with("sha256", json!("abc")), "sha256"),
        (with("sha256", json!("z".repeat(64))), "sha256"),
        (with("size", json!(0)), "size"),
        (with("size", json!(-1)), "size"),
        (with("size", json!(2.5)), "size"),
        (with("size", json!("10")), "size"),
        (with("size", json!(256u64 * 1024 * 1024 + 1)), "size"),
        (with("signature", json!("not base64!")), "signature"),
        (
            with("signature", json!(STANDARD.encode([0u8; 10]))),
            "signature",
        ),
    ];
    let before = table_contents(&state.table).await;
    for (body, field) in cases {
        let a = send(
            &state,
            ApiRequest::post("/me/firmware")
                .caller(ALICE)
                .json(body.clone()),
        )
        .await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
        assert_eq!(a.error_field(), field, "{body}: {:?}", a.body);
        assert!(a.body["error"]["message"].is_string());
    }
    // Unknown or missing fields, and keys that are not Ed25519 keys.
    for body in [json!({"deviceType": "t"}), with("extra", json!(1))] {
        let a = send(
            &state,
            ApiRequest::post("/me/firmware")
                .caller(ALICE)
                .json(body.clone()),
        )
        .await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
    }
    for (path, body, field) in [
        (
            "/me/firmware-keys/thermostat",
            json!({"publicKey": "AAAA"}),
            "publicKey",
        ),
        (
            "/me/firmware-keys/a.b:c",
            json!({"publicKey": STANDARD.encode([1u8; 31])}),
            "publicKey",
        ),
    ] {
        let a = send(
            &state,
            ApiRequest::put(path).caller(ALICE).json(body.clone()),
        )
        .await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
        assert_eq!(a.error_field(), field);
    }
    assert_eq!(table_contents(&state.table).await, before, "nothing stored");
}
