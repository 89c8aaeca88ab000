import Storage

extension IdentityMigrations {
    /// The sign-in log (SPEC §2.13): one row per sign-in, sign-up, reset, profile edit and
    /// token grant, newest read first, pruned by age and count. The audit log: one row per
    /// admin change, the same way.
    static let activityMigrations: [Migration] = [
        Migration(
            version: 35, name: "sign-in log",
            [
                """
                CREATE TABLE sign_in_events (
                    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL, correlation_id TEXT NOT NULL, kind TEXT NOT NULL, app_id TEXT,
                    app_name TEXT, policy TEXT, user_id TEXT, user_principal_name TEXT, user_display_name TEXT,
                    ip_address TEXT, error_code BIGINT NOT NULL, failure_reason TEXT, grant_type TEXT,
                    interactive BIGINT NOT NULL, steps TEXT NOT NULL)
                """,
                "CREATE INDEX sign_in_events_by_time ON sign_in_events (tenant_id, created_at, id)",
                // For the retention's delete, which covers every tenant.
                "CREATE INDEX sign_in_events_by_age ON sign_in_events (created_at)",
            ]),
        Migration(
            version: 36, name: "audit log",
            [
                """
                CREATE TABLE directory_audits (
                    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL, correlation_id TEXT NOT NULL, activity TEXT NOT NULL, category TEXT NOT NULL,
                    operation_type TEXT NOT NULL, logged_by TEXT NOT NULL, initiator_kind TEXT NOT NULL, initiator_id TEXT,
                    initiator_name TEXT, initiator_principal TEXT, ip_address TEXT, target_id TEXT, target TEXT, failure_reason TEXT,
                    details TEXT NOT NULL)
                """,
                "CREATE INDEX directory_audits_by_time ON directory_audits (tenant_id, created_at, id)",
                "CREATE INDEX directory_audits_by_age ON directory_audits (created_at)",
            ]),
        // The admin console (SPEC §2.13): who holds a directory role, and the console's sign-ins.
        Migration(
            version: 37, name: "directory roles and console sessions",
            [
                """
                CREATE TABLE directory_role_members (
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, role TEXT NOT NULL,
                    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, created_at BIGINT NOT NULL,
                    PRIMARY KEY (user_id, role))
                """,
                """
                CREATE TABLE console_sessions (
                    token_hash TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, csrf TEXT NOT NULL,
                    created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                """,
                "CREATE INDEX console_sessions_by_user ON console_sessions (user_id)",
            ]),
        // Graph as the management plane (SPEC §2.14): an app's redirect URIs by platform, its
        // exposed scopes' ids, the permissions it requests, its groups claim, its secrets'
        // names; security groups and their members (a user or another group: one of the two
        // references, so deleting either removes the membership).
        Migration(
            version: 38, name: "graph management plane",
            [
                "ALTER TABLE applications ADD COLUMN redirect_platforms TEXT NOT NULL DEFAULT '{}'",
                "ALTER TABLE applications ADD COLUMN scope_ids TEXT NOT NULL DEFAULT '{}'",
                "ALTER TABLE applications ADD COLUMN required_resource_access TEXT NOT NULL DEFAULT '[]'",
                "ALTER TABLE applications ADD COLUMN group_membership_claims TEXT",
                "ALTER TABLE application_secrets ADD COLUMN display_name TEXT",
                """
                CREATE TABLE groups (
                    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    display_name TEXT NOT NULL, description TEXT, mail_nickname TEXT NOT NULL, created_at BIGINT NOT NULL)
                """,
                "CREATE INDEX groups_by_tenant ON groups (tenant_id, display_name, id)",
                """
                CREATE TABLE group_members (
                    group_id TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE, member_id TEXT NOT NULL,
                    user_id TEXT REFERENCES users(id) ON DELETE CASCADE, member_group_id TEXT REFERENCES groups(id) ON DELETE CASCADE,
                    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, created_at BIGINT NOT NULL,
                    PRIMARY KEY (group_id, member_id))
                """,
                "CREATE INDEX group_members_by_member ON group_members (member_id)",
            ]),
        // Native authentication (SPEC §2.15): which apps the API answers.
        Migration(version: 39, name: "native authentication opt-in", ["ALTER TABLE applications ADD COLUMN native_auth BOOLEAN NOT NULL DEFAULT FALSE"]),
        // Native-authentication flows in progress, by their continuation token's hash.
        Migration(
            version: 40, name: "native authentication flows",
            [
                """
                CREATE TABLE native_auth_flows (
                    token_hash TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, client_id TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, step TEXT NOT NULL, method TEXT, attempts BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL)
                """,
                "CREATE INDEX native_auth_flows_by_age ON native_auth_flows (expires_at)",
            ]),
        // Native authentication's sign-up and password reset (no account yet, or one to prove):
        // flows keep a stable id (their codes are bound to it), the address, and their pending
        // data. The table holds ten-minute flows only, so it is made anew.
        Migration(
            version: 41, name: "native authentication sign-up and reset flows",
            [
                "DROP TABLE native_auth_flows",
                """
                CREATE TABLE native_auth_flows (
                    token_hash TEXT PRIMARY KEY, flow_id TEXT NOT NULL, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    client_id TEXT NOT NULL, user_id TEXT REFERENCES users(id) ON DELETE CASCADE, email TEXT, step TEXT NOT NULL,
                    method TEXT, data TEXT NOT NULL, attempts BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                """,
                "CREATE INDEX native_auth_flows_by_age ON native_auth_flows (expires_at)",
            ]),
        // Claims an OnTokenIssuanceStart extension provided at a hosted-page sign-in (SPEC
        // §2.15), kept with its code for the tokens the code buys.
        Migration(version: 42, name: "extension-provided claims on codes", ["ALTER TABLE authorization_codes ADD COLUMN extra_claims TEXT"]),
        // The native authentication API's new flows per client address in the last hour (the
        // hosted pages count their transactions the same way): a flow is a row and, for a
        // sign-up with a password, a bcrypt hash, so an address may start only so many.
        Migration(
            version: 43, name: "native authentication starts per address",
            [
                "CREATE TABLE native_auth_starts (client_address TEXT NOT NULL, created_at BIGINT NOT NULL)",
                "CREATE INDEX native_auth_starts_by_address ON native_auth_starts (client_address, created_at)",
            ]),
        // The look-alike table now comes from Unicode's confusables data: every local account's
        // skeleton is made again at the next start (`fillSkeletons`, oldest first).
        Migration(
            version: 44, name: "skeletons from Unicode's confusables data",
            ["UPDATE users SET sign_in_skeleton = NULL WHERE identity_provider = 'local'"]),
        // The answer a completed transaction sent the app (its code, its state), sealed, stored
        // with the completion: a browser that reloads after a crash (the answer never reached
        // it) is sent on with it rather than shown "Already completed" (issue 51).
        Migration(version: 45, name: "a completed transaction's answer", ["ALTER TABLE authorization_requests ADD COLUMN sealed_answer TEXT"]),
    ]
}
