//! dashboard: every `GET /me...` and `GET /admin...` read. Not built yet: no handler exists.
