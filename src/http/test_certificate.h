// Tests' self-signed certificate for 127.0.0.1 (CN and an IP subjectAltName, so clients that
// check names accept it), made in memory with OpenSSL; write() puts it and its key in PEM.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>

namespace herd::http {

struct TestCertificate {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();

  TestCertificate() {
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509_EXTENSION* san =
        X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, "IP:127.0.0.1");
    X509_add_ext(cert, san, -1);
    X509_EXTENSION_free(san);
  }
  ~TestCertificate() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  TestCertificate(const TestCertificate&) = delete;
  TestCertificate& operator=(const TestCertificate&) = delete;

  // Signs it; false when OpenSSL could not make or sign it.
  bool sign() { return key != nullptr && X509_sign(cert, key, EVP_sha256()) > 0; }

  // dir/cert.pem and dir/key.pem.
  void write(const std::filesystem::path& dir) const {
    FILE* f = std::fopen((dir / "cert.pem").c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
    f = std::fopen((dir / "key.pem").c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }
};

}  // namespace herd::http
