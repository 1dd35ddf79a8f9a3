#include <vector>

namespace linalg {

class Matrix {
public:
    Matrix(int rows, int cols) : rows_(rows), cols_(cols), data_(rows * cols) {}

    double at(int r, int c) const { return data_[r * cols_ + c]; }

    Matrix transpose() const;

private:
    int rows_, cols_;
    std::vector<double> data_;
};

// Returns a new matrix with rows and columns swapped.
Matrix Matrix::transpose() const {
    Matrix t(cols_, rows_);
    for (int r = 0; r < rows_; ++r)
        for (int c = 0; c < cols_; ++c)
            t.data_[c * rows_ + r] = at(r, c);
    return t;
}

template <typename T>
T clamp(T x, T lo, T hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}

}  // namespace linalg
