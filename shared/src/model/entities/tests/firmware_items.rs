//! The firmware entities: keys round-trip, declared attributes are the stored ones, and
//! owner and id read back from the key.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::entities::firmware::FirmwareItem;
use crate::model::entities::firmware_keys::FirmwareKeysItem;
use crate::model::entities::{Entity, ItemKey};
use crate::model::expression::Attribute;
use crate::model::firmware::{FirmwareId, FirmwareStatus};
use crate::model::ids::{DeviceType, UserId};
use crate::model::schema::{Item, ENTITY_TYPE, KEY_ATTRIBUTES};
use crate::model::shard::ShardCounts;
use crate::model::timestamp::Timestamp;

fn stored(item: &Item) -> BTreeSet<String> {
    let keys = KEY_ATTRIBUTES.map(|a| a.name());
    item.keys()
        .filter(|n| !keys.contains(&n.as_str()) && *n != ENTITY_TYPE.name())
        .cloned()
        .collect()
}

fn declared(names: &[Attribute]) -> BTreeSet<String> {
    names.iter().map(|a| a.name().to_string()).collect()
}

#[test]
fn firmware_keys_round_trip_and_have_their_own_partition() {
    let user = UserId::parse("u").unwrap();
    let firmware = FirmwareId::parse("f-000000000000001-0123456789abcdef").unwrap();
    let package = ItemKey::Firmware {
        user: user.clone(),
        firmware,
    };
    let keys = ItemKey::FirmwareKeys { user };
    for key in [package, keys] {
        let pk = key.primary_key();
        assert!(pk.pk.starts_with("FIRMWARE#"), "{}", pk.pk);
        assert_eq!(ItemKey::parse(&pk.pk, &pk.sk).unwrap(), key);
    }
    assert!(ItemKey::parse("FIRMWARE#u", "PACKAGE#../x").is_err());
}

#[test]
fn declared_attributes_are_exactly_the_stored_ones_and_keys_read_back() {
    let at = Timestamp::parse_field("at", "2024-04-10T10:00:00Z").unwrap();
    let shards = ShardCounts::default();
    let package = FirmwareItem {
        user_id: UserId::parse("u").unwrap(),
        firmware_id: FirmwareId::generate(at),
        device_type: DeviceType::parse("thermostat").unwrap(),
        version: "1.2.3".into(),
        sha256: "a".repeat(64),
        size: 10,
        signature: Some("sig".into()),
        public_key: Some("key".into()),
        status: FirmwareStatus::Rejected,
        reason: Some("why".into()),
        created_at: at,
        object_version: Some("v1".into()),
        checked_at: Some(at),
    };
    let item = package.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(FirmwareItem::ATTRIBUTES));
    assert_eq!(FirmwareItem::from_item(item).unwrap(), package);

    let keys = FirmwareKeysItem {
        user_id: UserId::parse("u").unwrap(),
        keys: BTreeMap::from([("thermostat".to_string(), "key".to_string())]),
        version: 2,
    };
    let item = keys.to_item(&shards).unwrap();
    assert_eq!(stored(&item), declared(FirmwareKeysItem::ATTRIBUTES));
    assert_eq!(FirmwareKeysItem::from_item(item).unwrap(), keys);
}
