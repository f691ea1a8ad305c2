//! [`Ingestor`]'s warm-Lambda caches of live states, owners' rules and the newest summary
//! blocks, and the one read of what is not cached.

use super::*;

impl Ingestor {
    pub(super) fn cached_state(&self, device: &DeviceId) -> Option<DeviceStateItem> {
        self.states.lock().expect("cache lock").get(device).cloned()
    }

    /// Keeps the newest blocks `items` leave, as of the state's `ingest_seq` after their write.
    pub(super) fn remember_blocks(&self, device: &DeviceId, ingest_seq: u64, items: &SeriesItems) {
        let mut cache = self.blocks.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(device) {
            cache.clear();
        }
        cache.insert(device.clone(), (ingest_seq, items.newest_blocks()));
    }

    /// The blocks this ingestor wrote for `device` if the state is still at `ingest_seq` (no
    /// summary write since: each moves it); else nothing (read them).
    pub(super) fn cached_blocks(&self, device: &DeviceId, ingest_seq: u64) -> SeriesItems {
        let cache = self.blocks.lock().expect("cache lock");
        match cache.get(device) {
            Some((seq, items)) if *seq == ingest_seq => items.clone(),
            _ => SeriesItems::default(),
        }
    }

    pub(super) fn remember_state(&self, state: DeviceStateItem) {
        let mut cache = self.states.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(&state.device_id) {
            cache.clear();
        }
        cache.insert(state.device_id.clone(), state);
    }

    /// The owner's rules while this Lambda's copy is fresh.
    pub(super) fn cached_rules(&self, user: &UserId, now: Instant) -> Option<Arc<Vec<Rule>>> {
        let cache = self.rules.lock().expect("cache lock");
        cache
            .get(user)
            .filter(|c| now - c.fetched < self.config.rules_cache)
            .map(|c| c.rules.clone())
    }

    pub(super) fn remember_rules(&self, user: &UserId, rules: Arc<Vec<Rule>>, fetched: Instant) {
        let mut cache = self.rules.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(user) {
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

    /// The live state of the device of `registration` and its owner's alarm rules: this warm
    /// Lambda's copies, or one consistent BatchGetItem of what is not cached (a read costs half
    /// of a failed conditional write of the item, and API Gateway spreads a device's batches
    /// over containers, so most batches miss the state cache). A device without a state item
    /// is gone: [`FleetError::Unauthorized`].
    pub(super) async fn live_state(
        &self,
        registration: &RegistrationItem,
    ) -> Result<(DeviceStateItem, Arc<Vec<Rule>>), FleetError> {
        let cached = self.cached_state(&registration.device_id);
        let read = self
            .read_state_and_rules(registration, state_key(registration), cached.is_none())
            .await;
        match read {
            Ok((Some(state), rules)) => {
                self.remember_state(state.clone());
                Ok((state, rules))
            }
            Ok((None, rules)) => Ok((cached.expect("the state was cached"), rules)),
            Err(FleetError::Unauthorized) => {
                self.forget(&registration.device_id);
                Err(FleetError::Unauthorized)
            }
            Err(err) => Err(err),
        }
    }
}
