/* SPDX-License-Identifier: MIT */
/* Capability tokens, their secrets: minted from libsodium's randomness, spelled as
 * "sbx_" + base64url, and hashed with a personalized BLAKE2b, the only form sbxd keeps.
 * A secret is wiped once hashed; it is never stored, logged, or put in an error message. */
#include "token/token_impl.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

/* BLAKE2b's personalization: a hash made for anything else never matches ours. */
static const unsigned char token_personal[crypto_generichash_blake2b_PERSONALBYTES] =
    "sbx-token-v1";
static const unsigned char token_salt[crypto_generichash_blake2b_SALTBYTES];

void token_secret_hash(const uint8_t secret[TOKEN_SECRET_BYTES], uint8_t ret_hash[TOKEN_HASH_BYTES])
{
    /* No key: the secret is 256 uniformly random bits, so the hash cannot be inverted or
     * guessed, and a key would only be one more secret to lose (docs/TOKENS.md). */
    (void)crypto_generichash_blake2b_salt_personal(ret_hash, TOKEN_HASH_BYTES, secret,
                                                   TOKEN_SECRET_BYTES, NULL, 0, token_salt,
                                                   token_personal);
}

int token_secret_decode(const char *s, size_t len, uint8_t ret_secret[TOKEN_SECRET_BYTES])
{
    size_t plen = strlen(TOKEN_PREFIX);
    size_t got = 0;
    const char *end = NULL;
    if (len != TOKEN_STR_LEN || memcmp(s, TOKEN_PREFIX, plen) != 0) {
        return -EINVAL;
    }
    /* libsodium refuses non-canonical trailing bits, so one secret has one spelling. */
    if (sodium_base642bin(ret_secret, TOKEN_SECRET_BYTES, s + plen, len - plen, NULL, &got, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        got != TOKEN_SECRET_BYTES || end != s + len) {
        sodium_memzero(ret_secret, TOKEN_SECRET_BYTES);
        return -EINVAL;
    }
    return 0;
}

/* Mints a secret: its string into str, its hash into hash; the secret itself is wiped. */
void token_secret_mint(char str[TOKEN_STR_LEN + 1], uint8_t hash[TOKEN_HASH_BYTES])
{
    uint8_t secret[TOKEN_SECRET_BYTES];
    size_t plen = strlen(TOKEN_PREFIX);
    randombytes_buf(secret, sizeof(secret));
    memcpy(str, TOKEN_PREFIX, plen);
    (void)sodium_bin2base64(str + plen, TOKEN_STR_LEN + 1 - plen, secret, sizeof(secret),
                            sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    token_secret_hash(secret, hash);
    sodium_memzero(secret, sizeof(secret));
}
