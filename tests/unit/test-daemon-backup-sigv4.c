/* The S3 store's signatures (decision 0049): cellad signs with libcurl's SigV4
 * (CURLOPT_AWS_SIGV4 "aws:amz:REGION:s3" and the key pair as user:password), which puts the
 * query in the canonical request as it is written. Here that signer, with cellad's options,
 * gives the signatures of AWS's documented examples ("Signature Calculations for the
 * Authorization Header", S3 API reference: GET Object with a Range, GET Bucket lifecycle
 * written "?lifecycle=", GET Bucket with "max-keys=2&prefix=J"), captured by a listener on
 * loopback; and the multipart queries cellad writes are in that canonical form (sorted,
 * encoded). */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/backup-store.h"

#define KEY "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct listener {
        int fd;
        int port;
        char auth[1024]; /* the Authorization header of the request served */
};

/* Serve one request: its Authorization header kept, 200 with an empty body. */
static void *serve_one(void *ud)
{
        struct listener *l = ud;
        char buf[8192];
        size_t len = 0;
        int c = accept(l->fd, NULL, NULL);

        if (c < 0)
                return NULL;
        while (len + 1 < sizeof(buf)) {
                ssize_t n = read(c, buf + len, sizeof(buf) - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
                buf[len] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                        break;
        }
        buf[len] = '\0';
        const char *a = strstr(buf, "\r\nAuthorization: ");
        if (a) {
                a += 17;
                size_t n = strcspn(a, "\r\n");
                if (n < sizeof(l->auth)) {
                        memcpy(l->auth, a, n);
                        l->auth[n] = '\0';
                }
        }
        static const char ok[] =
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        if (write(c, ok, sizeof(ok) - 1) < 0) {
        }
        close(c);
        return NULL;
}

/* GET url (on host examplebucket.s3.amazonaws.com, sent to the listener) signed as cellad
 * signs, at the examples' time; the Authorization header sent into auth. */
static void sign(const char *url, const char *range, char *auth, size_t authsz)
{
        struct listener l = {0};
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);
        struct curl_slist *h = NULL;
        char connect_to[128];
        pthread_t t;
        CURL *c;

        l.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(l.fd >= 0);
        assert_int_equal(bind(l.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(l.fd, 1), 0);
        assert_int_equal(getsockname(l.fd, (struct sockaddr *)&sa, &sl), 0);
        l.port = ntohs(sa.sin_port);
        assert_int_equal(pthread_create(&t, NULL, serve_one, &l), 0);

        c = curl_easy_init();
        assert_non_null(c);
        snprintf(connect_to, sizeof(connect_to), "examplebucket.s3.amazonaws.com:80:127.0.0.1:%d",
                 l.port);
        struct curl_slist *ct = curl_slist_append(NULL, connect_to);
        curl_easy_setopt(c, CURLOPT_CONNECT_TO, ct);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
        curl_easy_setopt(c, CURLOPT_USERPWD, KEY ":" SECRET);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        /* the examples' time: a date given in the request is the one signed */
        h = curl_slist_append(h, "x-amz-date: 20130524T000000Z");
        h = curl_slist_append(h, "x-amz-content-sha256: " EMPTY_SHA256);
        if (range)
                h = curl_slist_append(h, range);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        assert_int_equal(curl_easy_perform(c), CURLE_OK);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        curl_slist_free_all(ct);
        pthread_join(t, NULL);
        close(l.fd);
        snprintf(auth, authsz, "%s", l.auth);
}

static void test_aws_examples(void **state)
{
        static const struct {
                const char *url, *range, *signed_headers, *signature;
        } ex[] = {
                {"http://examplebucket.s3.amazonaws.com/test.txt", "Range: bytes=0-9",
                 "host;range;x-amz-content-sha256;x-amz-date",
                 "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
                /* a parameter without a value is written with its '=': the canonical form */
                {"http://examplebucket.s3.amazonaws.com/?lifecycle=", NULL,
                 "host;x-amz-content-sha256;x-amz-date",
                 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
                {"http://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", NULL,
                 "host;x-amz-content-sha256;x-amz-date",
                 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
        };
        char auth[1024], want[1024];

        (void)state;
        for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
                sign(ex[i].url, ex[i].range, auth, sizeof(auth));
                snprintf(want, sizeof(want),
                         "AWS4-HMAC-SHA256 Credential=" KEY "/20130524/us-east-1/s3/aws4_request, "
                         "SignedHeaders=%s, Signature=%s",
                         ex[i].signed_headers, ex[i].signature);
                if (strcmp(auth, want) != 0)
                        fail_msg("%s:\n got  %s\n want %s", ex[i].url, auth, want);
        }
}

static void test_upload_query(void **state)
{
        char q[256];

        (void)state;
        assert_int_equal(backup_s3_upload_query(3, "abc123", q, sizeof(q)), 0);
        assert_string_equal(q, "partNumber=3&uploadId=abc123");
        assert_int_equal(backup_s3_upload_query(0, "abc123", q, sizeof(q)), 0);
        assert_string_equal(q, "uploadId=abc123");
        /* S3's ids hold characters a query must encode */
        assert_int_equal(backup_s3_upload_query(10000, "a.b-c_d~e/f+g=", q, sizeof(q)), 0);
        assert_string_equal(q, "partNumber=10000&uploadId=a.b-c_d~e%2Ff%2Bg%3D");
        assert_int_equal(backup_s3_upload_query(1, "abc", q, 10), -ENAMETOOLONG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_aws_examples),
                cmocka_unit_test(test_upload_query),
        };
        curl_global_init(CURL_GLOBAL_DEFAULT);
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
