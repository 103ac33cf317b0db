/* rdkbench: a librdkafka producer and consumer for benchmarks/suite_c.py.
 *
 * Compiled at benchmark time (gcc -O2 rdkbench.c -lrdkafka), so the broker,
 * not a Python client, is the limit. Every mode prints one JSON object on
 * stdout (a latency consumer prints "ready" first) and exits 0, or prints a
 * line on stderr and exits 1.
 *
 *   produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE ACKS IDEMPOTENT RATE STAMP [PACER]
 *       COUNT records round-robin over the partitions, the clock running from
 *       the first produce until every record is acknowledged: as fast as the
 *       client goes (RATE 0) or paced at RATE records/s. PACER "sleep" (the
 *       default) sends what is due, then sleeps 1 ms; "spin" busy-waits on
 *       CLOCK_MONOTONIC until each record's own due time (t0 + i/RATE) and
 *       serves callbacks after every send, as rdkafka_performance -r does
 *       at rates above 10k/s (its pause is then a busy loop): the pacing
 *       keeps one core busy. SIGTERM or SIGINT stops the sending early (a
 *       load generator given a large COUNT); what was sent is still flushed
 *       and reported.
 *       STAMP 1: linger.ms 0 and each value starts with 'M' and the 8-byte
 *       big-endian CLOCK_MONOTONIC nanoseconds of its produce call (else
 *       linger.ms 5, as for the flat-out runs).
 *       {"records", "bytes", "seconds", "rate", "errors"}
 *   consume BOOTSTRAP TOPIC PARTITIONS WINDOW
 *       reads the newest WINDOW records of each partition; the clock runs from
 *       assign until the last one. {"records", "bytes", "seconds"}
 *   latency BOOTSTRAP TOPIC PARTITIONS EXPECT TIMEOUT_S
 *       assigns every partition from offset 0, prints "ready" once it has seen
 *       one record not starting with 'M' on each partition (the driver's
 *       warm-up), then records arrival minus stamp of EXPECT stamped records.
 *       CLOCK_MONOTONIC is one clock for every process of the machine.
 *       {"samples", "p50_ms", "p99_ms", "p999_ms", "max_ms"}
 *   version
 *       librdkafka's version string (not JSON).
 *
 * Client settings match the Python suite's (suite_kafka.py PRODUCER/CONSUMER).
 * RDKBENCH_CONF in the environment adds settings, one key=value a line (the
 * TLS comparison, tls_bench.py).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "rdkbench: %s: %s\n", what, detail);
    exit(1);
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        die(key, err);
}

/* Extra settings from the environment, RDKBENCH_CONF="key=value\nkey=value"
 * (the TLS phase: security.protocol, ssl.ca.location, ...). */
static void extra(rd_kafka_conf_t *conf) {
    const char *env = getenv("RDKBENCH_CONF");
    if (!env || !*env)
        return;
    char *copy = strdup(env), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (!eq)
            die("RDKBENCH_CONF", line);
        *eq = '\0';
        set(conf, line, eq + 1);
    }
    free(copy);
}

static rd_kafka_t *client(rd_kafka_type_t type, rd_kafka_conf_t *conf) {
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new", err);
    return rk;
}

/* ------------------------------------------------------------------ produce */

static long delivered, failed;
static volatile sig_atomic_t stopping;

static void on_stop(int sig) {
    (void)sig;
    stopping = 1;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (failed++ < 3)
            fprintf(stderr, "rdkbench: delivery: %s\n", rd_kafka_err2str(m->err));
    } else {
        delivered++;
    }
}

/* Stamp (if asked) and queue one record for PARTITION: 1 when queued, 0 when
 * librdkafka's queue was full (callbacks were served for up to 10 ms; the
 * caller tries again). Any other failure ends the run. */
static int send_one(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int32_t partition, char *value,
                    size_t size, int stamp) {
    if (stamp) {
        uint64_t ns = (uint64_t)now_ns();
        for (int b = 0; b < 8; b++)
            value[1 + b] = (char)(ns >> (56 - 8 * b));
    }
    if (rd_kafka_produce(rkt, partition, RD_KAFKA_MSG_F_COPY, value, size, NULL, 0,
                         NULL) == -1) {
        if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            die("produce", rd_kafka_err2str(rd_kafka_last_error()));
        rd_kafka_poll(rk, 10);
        return 0;
    }
    return 1;
}

static int produce(int argc, char **argv) {
    if (argc != 11 && argc != 12)
        die("usage", "produce BOOTSTRAP TOPIC PARTITIONS COUNT SIZE ACKS IDEMPOTENT RATE STAMP "
                     "[sleep|spin]");
    int spin = 0;
    if (argc == 12) {
        if (!strcmp(argv[11], "spin"))
            spin = 1;
        else if (strcmp(argv[11], "sleep"))
            die("produce", "PACER is sleep or spin");
    }
    const char *bootstrap = argv[2], *topic = argv[3], *acks = argv[7];
    int partitions = atoi(argv[4]), idempotent = atoi(argv[8]), stamp = atoi(argv[10]);
    long count = atol(argv[5]), rate = atol(argv[9]);
    size_t size = (size_t)atol(argv[6]);
    if (stamp && size < 9)
        die("produce", "a stamped value needs at least 9 bytes");

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", bootstrap);
    extra(conf);
    set(conf, "acks", acks);
    set(conf, "enable.idempotence", idempotent ? "true" : "false");
    set(conf, "linger.ms", stamp ? "0" : "5"); /* a load generator batches */
    set(conf, "batch.size", "1048576");
    set(conf, "batch.num.messages", "1000000");
    set(conf, "message.max.bytes", "1048588");
    set(conf, "queue.buffering.max.messages", "2000000");
    set(conf, "queue.buffering.max.kbytes", "2097151");
    set(conf, "log_level", "3");
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, conf);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);

    /* Connected and the topic known before the clock starts. */
    const struct rd_kafka_metadata *md;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        die("produce", "no metadata for the topic");
    rd_kafka_metadata_destroy(md);

    /* Half random, half repeated, like the Python suite's values. */
    char *value = malloc(size);
    srand(7);
    for (size_t i = 0; i < size; i++)
        value[i] = i < size / 2 ? (char)(rand() & 0xff) : 'x';
    if (stamp)
        value[0] = 'M';

    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    int64_t t0 = now_ns();
    long sent = 0;
    while (sent < count && !stopping) {
        if (rate && spin) {
            int64_t due_ns = t0 + (int64_t)((double)sent * 1e9 / (double)rate);
            while (now_ns() < due_ns) /* the spinning pacer: no sleep, ever */
                ;
            if (!send_one(rk, rkt, (int32_t)(sent % partitions), value, size, stamp))
                continue;
            sent++;
            rd_kafka_poll(rk, 0);
            continue;
        }
        long due = count;
        if (rate) {
            due = (long)((double)(now_ns() - t0) * rate / 1e9) + 1;
            if (due > count)
                due = count;
        }
        while (sent < due && !stopping) {
            if (!send_one(rk, rkt, (int32_t)(sent % partitions), value, size, stamp))
                continue;
            sent++;
            if (!(sent & 4095))
                rd_kafka_poll(rk, 0);
        }
        if (rate) {
            rd_kafka_poll(rk, 0);
            struct timespec pause = {0, 1000000}; /* 1 ms steps */
            nanosleep(&pause, NULL);
        }
    }
    double sending_s = (double)(now_ns() - t0) / 1e9;
    rd_kafka_flush(rk, 120000);
    double elapsed = (double)(now_ns() - t0) / 1e9;
    long left = rd_kafka_outq_len(rk);
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f, \"rate\": %.1f, "
           "\"errors\": %ld, \"left\": %ld}\n",
           delivered, (long)(delivered * (long)size), elapsed,
           (double)sent / (rate ? sending_s : elapsed), failed, left);
    free(value);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return failed || left || delivered != sent ? 1 : 0;
}

/* ------------------------------------------------------------------ consume */

static rd_kafka_t *consumer(const char *bootstrap) {
    char group[64];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(group, sizeof group, "rdkbench-%ld", (long)now_ns());
    set(conf, "bootstrap.servers", bootstrap);
    extra(conf);
    set(conf, "group.id", group);
    set(conf, "enable.auto.commit", "false");
    set(conf, "auto.offset.reset", "earliest");
    set(conf, "queued.min.messages", "1000000");
    set(conf, "fetch.wait.max.ms", "10");
    set(conf, "log_level", "3");
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, conf);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

static int consume(int argc, char **argv) {
    if (argc != 6)
        die("usage", "consume BOOTSTRAP TOPIC PARTITIONS WINDOW");
    const char *topic = argv[3];
    int partitions = atoi(argv[4]);
    long window = atol(argv[5]), want = 0;
    rd_kafka_t *rk = consumer(argv[2]);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++) {
        int64_t low, high;
        rd_kafka_resp_err_t err =
            rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high, 10000);
        if (err)
            die("watermarks", rd_kafka_err2str(err));
        int64_t start = high - window > low ? high - window : low;
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = start;
        want += (long)(high - start);
    }
    long got = 0, nbytes = 0;
    int64_t t0 = now_ns(), deadline = t0 + 120 * (int64_t)1000000000;
    rd_kafka_assign(rk, list);
    while (got < want) {
        if (now_ns() > deadline)
            die("consume", "not every record arrived in 120 s");
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (m->err) {
            if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                die("consume", rd_kafka_message_errstr(m));
        } else {
            got++;
            nbytes += (long)m->len;
        }
        rd_kafka_message_destroy(m);
    }
    double elapsed = (double)(now_ns() - t0) / 1e9;
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f}\n", got, nbytes, elapsed);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

/* ------------------------------------------------------------------ latency */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank, as benchmarks/_common.py's percentile() (ties round up). */
static double pct_ms(const int64_t *sorted, long n, double q) {
    long rank = (long)(q / 100 * n + 0.5 + 0.5); /* round(q/100*n + 0.5) */
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)sorted[rank - 1] / 1e6;
}

static int latency(int argc, char **argv) {
    if (argc != 7)
        die("usage", "latency BOOTSTRAP TOPIC PARTITIONS EXPECT TIMEOUT_S");
    const char *topic = argv[3];
    int partitions = atoi(argv[4]), warm = 0;
    long expect = atol(argv[5]), n = 0;
    int64_t deadline = now_ns() + (int64_t)(atof(argv[6]) * 1e9);
    int64_t *samples = malloc(sizeof(int64_t) * (size_t)(expect > 0 ? expect : 1));
    char *seen = calloc((size_t)partitions, 1);
    rd_kafka_t *rk = consumer(argv[2]);
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; p++)
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = 0;
    rd_kafka_assign(rk, list);
    while (n < expect) {
        if (now_ns() > deadline)
            break;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 50);
        int64_t arrived = now_ns();
        if (!m)
            continue;
        if (!m->err && m->len >= 9) {
            const unsigned char *v = m->payload;
            if (v[0] == 'M') {
                uint64_t ns = 0;
                for (int b = 0; b < 8; b++)
                    ns = ns << 8 | v[1 + b];
                samples[n++] = arrived - (int64_t)ns;
            } else if (m->partition < partitions && !seen[m->partition]) {
                seen[m->partition] = 1;
                if (++warm == partitions) {
                    printf("ready\n");
                    fflush(stdout);
                }
            }
        }
        rd_kafka_message_destroy(m);
    }
    if (n == 0)
        die("latency", "no stamped record arrived");
    qsort(samples, (size_t)n, sizeof *samples, cmp_i64);
    printf("{\"samples\": %ld, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": %.4f, "
           "\"max_ms\": %.4f}\n",
           n, pct_ms(samples, n, 50), pct_ms(samples, n, 99), pct_ms(samples, n, 99.9),
           (double)samples[n - 1] / 1e6);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(samples);
    free(seen);
    return n < expect;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "produce"))
        return produce(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "consume"))
        return consume(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "latency"))
        return latency(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "version")) {
        printf("%s\n", rd_kafka_version_str());
        return 0;
    }
    fprintf(stderr, "usage: rdkbench produce|consume|latency ... (see the source)\n");
    return 2;
}
