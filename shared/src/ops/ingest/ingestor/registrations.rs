//! [`Ingestor`]'s registrations: authentication with the warm-Lambda registration cache, the
//! rate limit, and a device moved to another owner since its registration was cached.

use super::*;

impl Ingestor {
    /// The registration of `device` if `token` is its token; otherwise
    /// [`FleetError::Unauthorized`], the same for an unknown device and a wrong token. A device
    /// over its batch rate is [`FleetError::RateLimited`].
    ///
    /// A registration read stays cached for `registration_cache`; an unknown device, and a
    /// registration a read showed not to match a presented token, are answered without a read
    /// for `negative_cache`, so a flood of guesses costs two reads (eventually consistent,
    /// then consistent) per device and window, not per attempt. The token is always compared
    /// in constant time with the stored hash.
    pub async fn authenticate(
        &self,
        device: &DeviceId,
        token: &str,
    ) -> Result<RegistrationItem, FleetError> {
        let now = Instant::now();
        if let Some(cached) = self.cached_registration(device, now) {
            match &cached.registration {
                Some(r) if r.accepts(token, Timestamp::now()) => {
                    return self.admit(device, r, now);
                }
                None => return Err(FleetError::Unauthorized),
                Some(_)
                    if cached
                        .refused
                        .is_some_and(|t| now - t < self.config.negative_cache) =>
                {
                    return Err(FleetError::Unauthorized);
                }
                // The token may be new (re-registration): read again.
                Some(_) => {}
            }
        }
        let accepted = |r: &Option<RegistrationItem>| {
            r.as_ref()
                .is_some_and(|r| r.accepts(token, Timestamp::now()))
        };
        // An eventually consistent read (half the units) is right for a device registered more
        // than a moment ago, which is nearly every read. A miss or a mismatch may be a
        // registration or rotation of the last second: read consistently before refusing.
        let mut registration = self.read_registration(device, false).await?;
        if !accepted(&registration) {
            registration = self.read_registration(device, true).await?;
        }
        let matched = accepted(&registration);
        self.remember(
            device,
            CachedRegistration {
                registration: registration.clone(),
                fetched: now,
                refused: (!matched).then_some(now),
            },
        );
        match registration {
            Some(r) if matched => self.admit(device, &r, now),
            _ => {
                self.states.lock().expect("cache lock").remove(device);
                Err(FleetError::Unauthorized)
            }
        }
    }

    /// The cached read of `device` while it is fresh: a registration for `registration_cache`,
    /// an absent device for `negative_cache`.
    pub(super) fn cached_registration(
        &self,
        device: &DeviceId,
        now: Instant,
    ) -> Option<CachedRegistration> {
        let cache = self.registrations.lock().expect("cache lock");
        let cached = cache.get(device)?;
        let ttl = match cached.registration {
            Some(_) => self.config.registration_cache,
            None => self.config.negative_cache,
        };
        (now - cached.fetched < ttl).then(|| cached.clone())
    }

    pub(super) fn remember(&self, device: &DeviceId, entry: CachedRegistration) {
        let mut cache = self.registrations.lock().expect("cache lock");
        if cache.len() >= CACHE_CAPACITY && !cache.contains_key(device) {
            cache.clear();
        }
        cache.insert(device.clone(), entry);
    }

    /// An authenticated device's batch, within its rate or refused with a 429.
    pub(super) fn admit(
        &self,
        device: &DeviceId,
        registration: &RegistrationItem,
        now: Instant,
    ) -> Result<RegistrationItem, FleetError> {
        self.device_limiter
            .take(device, now)
            .map_err(crate::ops::limits::rate_limited)?;
        Ok(registration.clone())
    }

    pub(super) async fn read_registration(
        &self,
        device: &DeviceId,
        consistent: bool,
    ) -> Result<Option<RegistrationItem>, FleetError> {
        let out = self
            .table
            .client
            .get_item()
            .table_name(self.table.name())
            .set_key(Some(
                ItemKey::Registration {
                    device: device.clone(),
                }
                .attributes(),
            ))
            .consistent_read(consistent)
            .send()
            .await
            .map_err(sdk_error)?;
        // A released registration (the device was deleted) authenticates nothing.
        out.item
            .filter(|item| EntityType::of(item) == Some(EntityType::Registration))
            .map(RegistrationItem::from_item)
            .transpose()
    }

    pub(super) fn forget(&self, device: &DeviceId) {
        self.registrations
            .lock()
            .expect("cache lock")
            .remove(device);
        self.states.lock().expect("cache lock").remove(device);
    }

    /// The registration of a device that moved to another owner since `stale` (this Lambda's
    /// cached copy) was read: read again consistently, the same registration (its
    /// `createdAt`: a move keeps it, a deletion and a new registration of the id do not)
    /// under another owner, its token not revoked. Cached in place of `stale`. `None` (and the
    /// cache dropped) when the device was deleted or its id registered again: the 401 stands.
    pub(super) async fn moved_registration(
        &self,
        stale: &RegistrationItem,
    ) -> Result<Option<RegistrationItem>, FleetError> {
        let device = &stale.device_id;
        let fresh = self.read_registration(device, true).await?;
        let moved = fresh.filter(|r| {
            r.user_id != stale.user_id && r.created_at == stale.created_at && r.revoked_at.is_none()
        });
        match &moved {
            Some(registration) => {
                self.states.lock().expect("cache lock").remove(device);
                self.remember(
                    device,
                    CachedRegistration {
                        registration: Some(registration.clone()),
                        fetched: Instant::now(),
                        refused: None,
                    },
                );
            }
            None => self.forget(device),
        }
        Ok(moved)
    }

    /// Deletes, best effort, what a request of a moved device may have stored under its old
    /// owner before the old live state was found gone (the event writes and the report go out
    /// beside the state's update): the same events and the report are stored under the new
    /// owner, so nothing of the device stays behind at the old one. One delete per event
    /// (and the reported document when the device reported), only on this rare path, after
    /// the request succeeded as the new owner's.
    pub(super) async fn forget_strays(
        &self,
        stale: &RegistrationItem,
        events: &[NewEvent],
        report: &DeviceReport,
    ) {
        let reported = report.reported.is_some().then(|| ItemKey::Reported {
            user: stale.user_id.clone(),
            device: stale.device_id.clone(),
        });
        let deletes: Vec<WriteRequest> = events
            .iter()
            .map(|e| ItemKey::Event {
                user: stale.user_id.clone(),
                device: stale.device_id.clone(),
                at: e.at,
                event: e.id.clone(),
            })
            .chain(reported)
            .filter_map(|key| {
                let delete = aws_sdk_dynamodb::types::DeleteRequest::builder()
                    .set_key(Some(key.attributes()))
                    .build()
                    .ok()?;
                Some(WriteRequest::builder().delete_request(delete).build())
            })
            .collect();
        for chunk in deletes.chunks(BATCH_WRITE_SIZE) {
            let mut retry = Retry::attempts(crate::store::table::MAX_ATTEMPTS);
            if let Err(err) = write_all(&self.table, chunk.to_vec(), &mut retry).await {
                tracing::warn!(device = %stale.device_id, error = %err, "a moved device's stray events were not deleted");
            }
        }
    }
}
