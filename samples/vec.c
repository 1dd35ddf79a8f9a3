#include <stdlib.h>
#include <string.h>

struct vec {
    int *data;
    size_t len;
    size_t cap;
};

/* Appends x, growing the buffer when full. */
int vec_push(struct vec *v, int x)
{
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        int *data = realloc(v->data, cap * sizeof *data);
        if (!data)
            return -1;
        v->data = data;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

long vec_sum(const struct vec *v)
{
    long total = 0;
    for (size_t i = 0; i < v->len; i++)
        total += v->data[i];
    return total;
}
