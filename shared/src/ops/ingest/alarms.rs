//! Alarm rules at ingest: the owner's rule set, read with the device's live state (one
//! BatchGetItem, so no request of its own) and cached per owner for `RULES_CACHE_SECONDS`:
//! a changed rule applies to every batch within that time.

use std::sync::Arc;
use std::time::Instant;

use aws_sdk_dynamodb::types::KeysAndAttributes;

use super::Ingestor;
use crate::model::alarm::rule::Rule;
use crate::model::entity::{Entity, EntityType};
use crate::model::error::FleetError;
use crate::model::ids::UserId;
use crate::model::items::{DeviceStateItem, RegistrationItem, RuleSetItem};
use crate::model::keys::ItemKey;
use crate::store::dynamo::get_all;
use crate::store::retry::Retry;

/// An owner's rules as a warm Lambda holds them.
#[derive(Clone)]
pub(super) struct CachedRules {
    pub(super) rules: Arc<Vec<Rule>>,
    fetched: Instant,
}

impl Ingestor {
    /// The owner's rules while this Lambda's copy is fresh.
    pub(super) fn cached_rules(&self, user: &UserId, now: Instant) -> Option<Arc<Vec<Rule>>> {
        let cache = self.rules.lock().expect("cache lock");
        cache
            .get(user)
            .filter(|c| now - c.fetched < self.config.rules_cache)
            .map(|c| c.rules.clone())
    }

    fn remember_rules(&self, user: &UserId, rules: Arc<Vec<Rule>>, fetched: Instant) {
        let mut cache = self.rules.lock().expect("cache lock");
        if cache.len() >= super::CACHE_CAPACITY && !cache.contains_key(user) {
            cache.clear();
        }
        cache.insert(user.clone(), CachedRules { rules, fetched });
    }

    /// Reads what is not cached of the device's live state and its owner's rules, in one
    /// request: a consistent BatchGetItem of both, or a GetItem-like read of one. Returns the
    /// state read (`None` when it was not asked for) and the rules (`None`: not asked for).
    /// A state asked for and absent means the device is gone ([`FleetError::Unauthorized`]).
    pub(super) async fn read_state_and_rules(
        &self,
        registration: &RegistrationItem,
        state_key: ItemKey,
        want_state: bool,
    ) -> Result<(Option<DeviceStateItem>, Arc<Vec<Rule>>), FleetError> {
        let now = Instant::now();
        let user = &registration.user_id;
        let cached = self.cached_rules(user, now);
        let rules_key = ItemKey::RuleSet { user: user.clone() };
        let mut keys = Vec::new();
        if want_state {
            keys.push(state_key.attributes());
        }
        if cached.is_none() {
            keys.push(rules_key.attributes());
        }
        if keys.is_empty() {
            return Ok((None, cached.unwrap_or_default()));
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .build()
            .map_err(FleetError::internal)?;
        let mut retry = Retry::until(now + self.config.retry_window).at_most(4);
        let items = get_all(&self.table, request, &mut retry).await?;
        let mut state = None;
        let mut rules = cached.clone();
        let mut read_rules = Vec::new();
        for item in items {
            match EntityType::of(&item) {
                Some(EntityType::DeviceState) => state = Some(DeviceStateItem::from_item(item)?),
                Some(EntityType::RuleSet) => read_rules = RuleSetItem::from_item(item)?.rule_list(),
                _ => {}
            }
        }
        if cached.is_none() {
            let fresh = Arc::new(read_rules);
            self.remember_rules(user, fresh.clone(), now);
            rules = Some(fresh);
        }
        if want_state && state.is_none() {
            return Err(FleetError::Unauthorized);
        }
        Ok((state, rules.unwrap_or_default()))
    }
}
