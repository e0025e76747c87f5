/* The C reference for the PAR sheets: the same exact enumeration as holdem.odds.par (its
 * flop sweep is holdem.odds.sweep's, its decisions holdem.odds.kernel's), in C with OpenMP
 * (one flop per iteration, dynamic schedule, per-thread accumulators).
 *
 * It reads the evaluator's look-up tables (written by bench/par.py from holdem.evaluator:
 * valuing hands is under 2% of the work) and a list of flops, and prints the same integer
 * accumulators as holdem.odds.par's flop jobs, summed over the flops, so the bench can check
 * that both computed the same numbers before it compares their CPU time.
 *
 *   par_reference TABLES ch  FLOPS M1 M2 M3   (one multiplier list of ten per pay table)
 *   par_reference TABLES thp FLOPS M
 * FLOPS: lines "c0 c1 c2 weight"; M: ten comma-separated ante multipliers, high card first.
 * Build: gcc -O2 -fopenmp -o par_reference par_reference.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define REMAINING 49
#define HOLES 1176
#define OTHERS 47
#define PAIRS 1081
#define DISJOINT 990
#define CH_COMPLETIONS 1070190LL
#define TURN_COMPLETIONS 45540LL
#define CH_SIZE 48
#define THP_SIZE 62
#define CLASSES 169
#define MAX_TABLES 8

static int64_t card_keys[52], rank_bits[52];
static int8_t suit7[512], suit5[512];
static uint16_t *rank7;
static int64_t rank7_len;
static uint16_t flush_table[1 << 15];
static uint8_t category[7463];
static int64_t five_key[7463];
static int64_t *face_sums, *face_strengths, face_len;
static int64_t threshold;
static int32_t class_table[52 * 52];

static int64_t *read_array(FILE *f, int64_t *n) {
    if (fread(n, 8, 1, f) != 1) { fprintf(stderr, "short tables file\n"); exit(2); }
    int64_t *out = malloc(8 * (size_t)*n);
    if (fread(out, 8, (size_t)*n, f) != (size_t)*n) { fprintf(stderr, "short tables file\n"); exit(2); }
    return out;
}

static void load_tables(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    int64_t n, *a;
    a = read_array(f, &n);
    for (int i = 0; i < 52; i++) card_keys[i] = a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 52; i++) rank_bits[i] = a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 512; i++) suit7[i] = (int8_t)a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 512; i++) suit5[i] = (int8_t)a[i];
    free(a);
    a = read_array(f, &rank7_len);
    rank7 = malloc(2 * (size_t)rank7_len);
    for (int64_t i = 0; i < rank7_len; i++) rank7[i] = (uint16_t)a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < (1 << 15); i++) flush_table[i] = (uint16_t)a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 7463; i++) category[i] = (uint8_t)a[i];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 7463; i++) five_key[i] = a[i];
    free(a);
    face_sums = read_array(f, &face_len);
    face_strengths = read_array(f, &n);
    a = read_array(f, &n);
    threshold = a[0];
    free(a);
    a = read_array(f, &n);
    for (int i = 0; i < 52 * 52; i++) class_table[i] = (int32_t)a[i];
    free(a);
    fclose(f);
}

static int64_t five_strength(const int *cards) {
    int64_t key = 0;
    for (int j = 0; j < 5; j++) key += card_keys[cards[j]];
    int suit = suit5[key & 511];
    if (suit >= 0) {
        int64_t mask = 0;
        for (int j = 0; j < 5; j++) mask |= rank_bits[cards[j]];
        return flush_table[mask];
    }
    int64_t want = key >> 9, lo = 0, hi = face_len;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (face_sums[mid] < want) lo = mid + 1; else hi = mid;
    }
    return face_strengths[lo];
}

/* Strength of flop + every 4-subset of the remaining cards, in colex order. */
static void value_hands(const int *flop, const int *remaining, uint16_t *out,
                        uint8_t (*subsets)[4]) {
    int64_t base = card_keys[flop[0]] + card_keys[flop[1]] + card_keys[flop[2]];
    int64_t i = 0;
    for (int d = 3; d < REMAINING; d++) {
        int64_t kd = base + card_keys[remaining[d]];
        for (int c = 2; c < d; c++) {
            int64_t kc = kd + card_keys[remaining[c]];
            for (int b = 1; b < c; b++) {
                int64_t kb = kc + card_keys[remaining[b]];
                for (int a = 0; a < b; a++) {
                    int64_t key = kb + card_keys[remaining[a]];
                    subsets[i][0] = (uint8_t)a;
                    subsets[i][1] = (uint8_t)b;
                    subsets[i][2] = (uint8_t)c;
                    subsets[i][3] = (uint8_t)d;
                    int suit = suit7[key & 511];
                    if (suit < 0) {
                        out[i] = rank7[key >> 9];
                    } else {
                        int cards[7] = {flop[0], flop[1], flop[2], remaining[a], remaining[b],
                                        remaining[c], remaining[d]};
                        int64_t mask = 0;
                        for (int j = 0; j < 7; j++)
                            if ((cards[j] & 3) == suit) mask |= rank_bits[cards[j]];
                        out[i] = flush_table[mask];
                    }
                    i++;
                }
            }
        }
    }
}

/* The sweep of holdem.odds.sweep: the flop's hands put in strength order (a counting sort),
 * dealt out to the 1,176 boards so that each gets its 1,081 pairs weakest first, and each
 * board swept from the weakest pair. */
static void sweep(const uint16_t *strength, const uint8_t (*subsets)[4], int ch, int thp,
                  int64_t (*nq_out)[10], int64_t (*wins_out)[10], int64_t *ties_out,
                  int64_t *losses_out, int32_t *thp_wins /* [49][1176][10] */,
                  int32_t *thp_losses /* [49][1176] */) {
    static const int HANDS = 211876;
    int64_t count[7464];
    memset(count, 0, sizeof count);
    for (int i = 0; i < HANDS; i++) count[strength[i] + 1]++;
    for (int v = 1; v < 7464; v++) count[v] += count[v - 1];
    /* Scratch kept per thread across flops: no page faults for fresh buffers each flop. */
    static __thread int32_t *order, *dealt;
    if (!order) {
        order = malloc(4 * (size_t)HANDS);
        dealt = malloc(4 * (size_t)HOLES * PAIRS);
    }
    for (int i = 0; i < HANDS; i++) order[count[strength[i]]++] = i;
    int filled[HOLES];
    memset(filled, 0, sizeof filled);
    for (int g = 0; g < HANDS; g++) {
        int at = order[g];
        int32_t s = (int32_t)strength[at] << 12;
        int w = subsets[at][0], x = subsets[at][1], y = subsets[at][2], z = subsets[at][3];
        int splits[6][4] = {{w, x, y, z}, {w, y, x, z}, {w, z, x, y},
                            {x, y, w, z}, {x, z, w, y}, {y, z, w, x}};
        for (int q = 0; q < 6; q++) {
            int c = splits[q][0], d = splits[q][1];
            int t = c * (97 - c) / 2 + d - c - 1;
            dealt[t * PAIRS + filled[t]++] = s | (splits[q][2] << 6) | splits[q][3];
        }
    }
    int holding[REMAINING], weak_holding[REMAINING], below[PAIRS];
    int t = 0;
    for (int c = 0; c < REMAINING; c++) {
        for (int d = c + 1; d < REMAINING; d++, t++) {
            const int32_t *row = dealt + (int64_t)t * PAIRS;
            memset(holding, 0, sizeof holding);
            int seen = 0, weak_seen = -1, start = 0;
            while (start < PAIRS) {
                int s = row[start] >> 12, end = start + 1;
                while (end < PAIRS && row[end] >> 12 == s) end++;
                if (weak_seen < 0 && s >= threshold) {
                    weak_seen = seen;
                    memcpy(weak_holding, holding, sizeof holding);
                }
                for (int g = start; g < end; g++) {
                    int a = (row[g] >> 6) & 63, b = row[g] & 63;
                    below[g] = seen - holding[a] - holding[b];
                }
                for (int g = start; g < end; g++) {
                    holding[(row[g] >> 6) & 63]++;
                    holding[row[g] & 63]++;
                }
                seen += end - start;
                int cat = category[s];
                for (int g = start; g < end; g++) {
                    int a = (row[g] >> 6) & 63, b = row[g] & 63;
                    int h = a * (97 - a) / 2 + b - a - 1;
                    int under = below[g], upto = seen - holding[a] - holding[b] + 1;
                    if (ch && s >= threshold) {
                        int nq = weak_seen - weak_holding[a] - weak_holding[b];
                        nq_out[h][cat] += nq;
                        wins_out[h][cat] += under - nq;
                        ties_out[h] += upto - under;
                        losses_out[h] += DISJOINT - upto;
                    }
                    if (thp) {
                        thp_wins[((int64_t)c * HOLES + h) * 10 + cat] += under;
                        thp_wins[((int64_t)d * HOLES + h) * 10 + cat] += under;
                        thp_losses[c * HOLES + h] += DISJOINT - upto;
                        thp_losses[d * HOLES + h] += DISJOINT - upto;
                    }
                }
                start = end;
            }
            if (ch) {
                /* A player below the threshold: every dealer pair that does not qualify is
                 * counted once the sweep has passed the threshold. */
                if (weak_seen < 0) {
                    weak_seen = seen;
                    memcpy(weak_holding, holding, sizeof holding);
                }
                for (int g = 0; g < PAIRS; g++) {
                    int s = row[g] >> 12;
                    if (s >= threshold) break;
                    int a = (row[g] >> 6) & 63, b = row[g] & 63;
                    int h = a * (97 - a) / 2 + b - a - 1;
                    int nq = weak_seen - weak_holding[a] - weak_holding[b] + 1;
                    nq_out[h][category[s]] += nq;
                    losses_out[h] += DISJOINT - nq;
                }
            }
        }
    }
}

static int pair_a[HOLES], pair_b[HOLES];

static void remaining_of(const int *flop, int *remaining) {
    int n = 0;
    for (int c = 0; c < 52; c++)
        if (c != flop[0] && c != flop[1] && c != flop[2]) remaining[n++] = c;
}

static void ch_flop(const int *flop, int64_t weight, int tables, int64_t (*mult)[10], int64_t *acc) {
    int remaining[REMAINING];
    remaining_of(flop, remaining);
    uint16_t *strength = malloc(2 * 211876);
    uint8_t (*subsets)[4] = malloc(4 * 211876);
    value_hands(flop, remaining, strength, subsets);
    int64_t (*nq)[10] = calloc(HOLES, sizeof *nq), (*wins)[10] = calloc(HOLES, sizeof *wins);
    int64_t *ties = calloc(HOLES, 8), *losses = calloc(HOLES, 8);
    sweep(strength, subsets, 1, 0, nq, wins, ties, losses, NULL, NULL);
    for (int h = 0; h < HOLES; h++) {
        int cards[5] = {remaining[pair_a[h]], remaining[pair_b[h]], flop[0], flop[1], flop[2]};
        int64_t five = five_key[five_strength(cards)];
        for (int i = 0; i < tables; i++) {
            int64_t *row = acc + i * CH_SIZE;
            int64_t numerator = -3 * losses[h];
            for (int c = 0; c < 10; c++) numerator += nq[h][c] * mult[i][c] + wins[h][c] * (mult[i][c] + 2);
            int call = numerator > -CH_COMPLETIONS;
            if (call) {
                for (int c = 0; c < 10; c++) { row[1 + c] += weight * nq[h][c]; row[11 + c] += weight * wins[h][c]; }
                row[21] += weight * ties[h];
                row[22] += weight * losses[h];
                row[24] += weight;
                row[47] += weight * numerator;
            } else {
                row[0] += weight * CH_COMPLETIONS;
                row[23] += weight;
                row[47] -= weight * CH_COMPLETIONS;
            }
            row[25 + five * 2 + call] += weight;
        }
    }
    free(strength); free(subsets); free(nq); free(wins); free(ties); free(losses);
}

static void thp_flop(const int *flop, int64_t weight, const int64_t *m, int64_t *acc) {
    int remaining[REMAINING];
    remaining_of(flop, remaining);
    uint16_t *strength = malloc(2 * 211876);
    uint8_t (*subsets)[4] = malloc(4 * 211876);
    value_hands(flop, remaining, strength, subsets);
    int32_t *wins = calloc((size_t)REMAINING * HOLES * 10, 4), *losses = calloc(REMAINING * HOLES, 4);
    sweep(strength, subsets, 0, 1, NULL, NULL, NULL, NULL, wins, losses);
    for (int h = 0; h < HOLES; h++) {
        int64_t after[2][OTHERS][3];
        int turns[OTHERS], n = 0;
        for (int x = 0; x < REMAINING; x++)
            if (x != pair_a[h] && x != pair_b[h]) turns[n++] = x;
        int64_t flop_n[3] = {0, -3 * TURN_COMPLETIONS * OTHERS, 0};
        int best[2][OTHERS];
        for (int j = 0; j < OTHERS; j++) {
            const int32_t *w = wins + ((int64_t)turns[j] * HOLES + h) * 10;
            int64_t lose = losses[turns[j] * HOLES + h], won = 0, paid = 0;
            for (int c = 0; c < 10; c++) { won += w[c]; paid += w[c] * m[c]; }
            for (int fb = 0; fb < 2; fb++) {
                int64_t played = 2 + fb;
                int64_t check = paid + played * won - lose * (1 + played);
                int64_t *x = after[fb][j];
                x[0] = check; x[1] = -(1 + played) * TURN_COMPLETIONS; x[2] = check + won - lose;
                int arg = 0;
                for (int q = 1; q < 3; q++) if (x[q] > x[arg]) arg = q;
                best[fb][j] = arg;
                flop_n[fb ? 2 : 0] += x[arg];
            }
        }
        int action = 0;
        for (int q = 1; q < 3; q++) if (flop_n[q] > flop_n[action]) action = q;
        int bet = action == 2, played = action != 1;
        int64_t row[THP_SIZE];
        memset(row, 0, sizeof row);
        row[0] = 1;
        row[1] = flop_n[action];
        int64_t *out = row + 2, *decisions = row + 2 + 51;
        if (!played) out[0] = TURN_COMPLETIONS * OTHERS;
        decisions[action] = 1;
        for (int j = 0; j < OTHERS; j++) {
            int turn_action = best[bet][j];
            if (!played) continue;
            decisions[(bet ? 6 : 3) + turn_action]++;
            if (turn_action == 1) { out[bet ? 2 : 1] += TURN_COMPLETIONS; continue; }
            int turn_bet = turn_action == 2;
            int64_t *block = out + 3 + (bet * 2 + turn_bet) * 12;
            const int32_t *w = wins + ((int64_t)turns[j] * HOLES + h) * 10;
            int64_t lose = losses[turns[j] * HOLES + h], won = 0;
            for (int c = 0; c < 10; c++) { block[c] += w[c]; won += w[c]; }
            block[10] += TURN_COMPLETIONS - won - lose;
            block[11] += lose;
        }
        int cls = class_table[remaining[pair_a[h]] * 52 + remaining[pair_b[h]]];
        for (int q = 0; q < THP_SIZE; q++) acc[cls * THP_SIZE + q] += weight * row[q];
    }
    free(strength); free(subsets); free(wins); free(losses);
}

static void parse_multipliers(const char *text, int64_t *m) {
    char *end;
    for (int c = 0; c < 10; c++) { m[c] = strtoll(text, &end, 10); text = end + 1; }
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: par_reference TABLES ch|thp FLOPS M...\n"); return 2; }
    load_tables(argv[1]);
    int thp = strcmp(argv[2], "thp") == 0;
    int tables = argc - 4;
    if (tables > MAX_TABLES || (thp && tables != 1)) { fprintf(stderr, "bad pay tables\n"); return 2; }
    int64_t mult[MAX_TABLES][10];
    for (int i = 0; i < tables; i++) parse_multipliers(argv[4 + i], mult[i]);
    for (int a = 0, h = 0; a < REMAINING; a++)
        for (int b = a + 1; b < REMAINING; b++, h++) {
            pair_a[h] = a;
            pair_b[h] = b;
        }
    FILE *f = fopen(argv[3], "r");
    if (!f) { perror(argv[3]); return 2; }
    int n = 0, cap = 2048, (*flops)[3] = malloc(sizeof *flops * cap);
    int64_t *weights = malloc(8 * cap);
    while (n < cap && fscanf(f, "%d %d %d %ld", &flops[n][0], &flops[n][1], &flops[n][2], &weights[n]) == 4) n++;
    fclose(f);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    size_t size = thp ? CLASSES * THP_SIZE : (size_t)tables * CH_SIZE;
    int64_t *total = calloc(size, 8);
#pragma omp parallel
    {
        int64_t *acc = calloc(size, 8);
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) {
            if (thp) thp_flop(flops[i], weights[i], mult[0], acc);
            else ch_flop(flops[i], weights[i], tables, mult, acc);
        }
#pragma omp critical
        for (size_t q = 0; q < size; q++) total[q] += acc[q];
        free(acc);
    }
    getrusage(RUSAGE_SELF, &after);
    double cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) + (after.ru_stime.tv_sec - before.ru_stime.tv_sec)
               + 1e-6 * ((after.ru_utime.tv_usec - before.ru_utime.tv_usec) + (after.ru_stime.tv_usec - before.ru_stime.tv_usec));
    printf("cpu %.6f\n", cpu);
    for (size_t q = 0; q < size; q++) printf("%ld%c", total[q], (q + 1) % (thp ? THP_SIZE : CH_SIZE) ? ' ' : '\n');
    return 0;
}
