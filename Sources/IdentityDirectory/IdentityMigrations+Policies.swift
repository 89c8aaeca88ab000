import Storage

extension IdentityMigrations {
    /// Custom policies and their key sets (SPEC §2.12).
    static let policyMigrations: [Migration] = [
        // A tenant's custom policies (SPEC §2.12): the XML as uploaded, keyed by the id in
        // any case, with the base it names (so a delete can refuse a policy others build on)
        // and a revision each write changes (so every instance knows when to compile again).
        Migration(
            version: 32, name: "custom policies",
            [
                """
                CREATE TABLE custom_policies (
                    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, policy_id_lower TEXT NOT NULL,
                    policy_id TEXT NOT NULL, base_policy_id TEXT, body TEXT NOT NULL, uploaded_at BIGINT NOT NULL,
                    revision TEXT NOT NULL, PRIMARY KEY (tenant_id, policy_id_lower))
                """
            ]),
        // Policy key sets (Graph beta trustFramework/keySets): a generated RSA key's private
        // part or an uploaded secret, sealed with the data key; the public parts beside it.
        Migration(
            version: 33, name: "policy key sets",
            [
                """
                CREATE TABLE trust_framework_key_sets (
                    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, key_set_id_lower TEXT NOT NULL,
                    key_set_id TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (tenant_id, key_set_id_lower))
                """,
                """
                CREATE TABLE trust_framework_keys (
                    tenant_id TEXT NOT NULL, key_set_id_lower TEXT NOT NULL, kid TEXT NOT NULL, use TEXT NOT NULL, kty TEXT NOT NULL,
                    sealed_secret TEXT NOT NULL, n TEXT, e TEXT, nbf BIGINT, exp BIGINT, created_at BIGINT NOT NULL,
                    PRIMARY KEY (tenant_id, key_set_id_lower, kid),
                    FOREIGN KEY (tenant_id, key_set_id_lower) REFERENCES trust_framework_key_sets (tenant_id, key_set_id_lower) ON DELETE CASCADE)
                """,
            ]),
        // An uploaded certificate's own public part (`uploadPkcs12`): the leaf certificate,
        // DER in base64, shown as Graph's `x5c`; the PKCS#12 file itself stays sealed.
        Migration(version: 34, name: "policy key certificates", ["ALTER TABLE trust_framework_keys ADD COLUMN x5c TEXT"]),
    ]
}
