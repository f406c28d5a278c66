"""MXNet's small contrib and patch operators, checked against the examples of MXNet's API reference
and hand computations: nd and sym (``_contrib_<op>`` graph nodes) give the same values."""

import numpy as np

import mxtorch as mx


def test_quadratic_and_gradientmultiplier_in_a_graph():
    x = mx.nd.array([[1, 2], [3, 4]])
    assert mx.nd.contrib.quadratic(x, a=1, b=2, c=3).asnumpy().tolist() == [[6, 11], [18, 27]]
    data = mx.sym.Variable("data")
    y = mx.sym.contrib.gradientmultiplier(mx.sym.contrib.quadratic(data=data, a=1, b=2, c=3), scalar=-0.5)
    assert '"_contrib_quadratic"' in y.tojson()
    exe = y.bind(mx.cpu(), {"data": x}, args_grad={"data": mx.nd.zeros((2, 2))})
    assert exe.forward(is_train=True)[0].asnumpy().tolist() == [[6, 11], [18, 27]]
    exe.backward(mx.nd.ones((2, 2)))
    # d/dx (x^2 + 2x + 3) = 2x + 2, times the multiplier -0.5
    assert exe.grad_dict["data"].asnumpy().tolist() == [[-2, -3], [-4, -5]]


def test_index_array_index_copy_batch_take_div_sqrt_dim():
    idx = mx.nd.contrib.index_array(mx.nd.ones((3, 2)))
    assert idx.asnumpy().tolist() == [[[0, 0], [0, 1]], [[1, 0], [1, 1]], [[2, 0], [2, 1]]]
    assert mx.nd.contrib.index_array(mx.nd.ones((3, 2, 2)), axes=(1, 0)).asnumpy()[1, 0, 1].tolist() == [0, 1]
    copied = mx.nd.contrib.index_copy(mx.nd.zeros((5, 3)), mx.nd.array([0, 4, 2]),
                                      mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
    assert copied.asnumpy().tolist() == [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0], [4, 5, 6]]
    taken = mx.nd.batch_take(mx.nd.array([[1, 2], [3, 4], [5, 6]]), mx.nd.array([0, 1, 0], dtype="int32"))
    assert taken.asnumpy().tolist() == [1, 4, 5]
    assert mx.nd.contrib.div_sqrt_dim(mx.nd.ones((2, 4))).asnumpy().tolist() == [[0.5] * 4] * 2


def test_adaptive_average_pooling_cells_cover_overlapping_rows():
    x = mx.nd.arange(9).reshape((1, 1, 3, 3))
    # 3 -> 2 cells: rows [0, 2) and [1, 3) (floor(i*3/2) .. ceil((i+1)*3/2)); likewise columns
    out = mx.nd.contrib.AdaptiveAvgPooling2D(x, output_size=2)
    assert out.asnumpy().reshape(2, 2).tolist() == [[2.0, 3.0], [5.0, 6.0]]
    assert mx.nd.contrib.AdaptiveAvgPooling2D(x).asnumpy().ravel().tolist() == [4.0]


def test_im2col_columns_are_windows_and_col2im_adds_overlaps():
    x = mx.nd.arange(16).reshape((1, 1, 4, 4))
    col = mx.nd.im2col(x, kernel=(2, 2), stride=(2, 2))
    assert col.shape == (1, 4, 4)
    assert col.asnumpy()[0, :, 0].tolist() == [0, 1, 4, 5]  # the top-left window, row by row
    ones = mx.nd.col2im(mx.nd.ones((1, 4, 9)), output_size=(4, 4), kernel=(2, 2))
    # stride 1: the centre pixels are in 4 windows, edges in 2, corners in 1
    assert ones.asnumpy()[0, 0].tolist() == [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]


def test_moments_symbol_has_mean_and_variance_outputs():
    data = mx.sym.Variable("data")
    m = mx.sym.moments(data, axes=(1,))
    assert len(m.list_outputs()) == 2
    mean, var = m.bind(mx.cpu(), {"data": mx.nd.array([[1, 3], [2, 2]])}).forward()
    assert mean.asnumpy().tolist() == [2, 2] and var.asnumpy().tolist() == [1, 0]
    np.testing.assert_allclose((m[0] + m[1]).bind(mx.cpu(), {"data": mx.nd.array([[1, 3]])}).forward()[0]
                               .asnumpy(), [3.0])


def test_multibox_prior_anchors_by_hand():
    data = mx.nd.zeros((1, 3, 2, 3))  # H=2, W=3: centres at ((c + .5) / 3, (r + .5) / 2)
    boxes = mx.contrib.nd.MultiBoxPrior(data, sizes=[0.5, 0.25], ratios=[1, 4])
    assert boxes.shape == (1, 2 * 3 * 3, 4)
    b = boxes.asnumpy()[0]
    # size .5, ratio 1: half width .5 * 2/3 / 2, half height .25, around (1/6, 1/4)
    np.testing.assert_allclose(b[0], [0.0, 0.0, 1 / 3, 0.5], atol=1e-6)
    # size .5, ratio 4: twice as wide (sqrt 4), half as high
    np.testing.assert_allclose(b[2], [1 / 6 - 1 / 3, 0.25 - 0.125, 1 / 6 + 1 / 3, 0.25 + 0.125], atol=1e-6)
    # the next cell along the row (column 1), same anchors shifted by 1/3
    np.testing.assert_allclose(b[3], b[0] + [1 / 3, 0, 1 / 3, 0], atol=1e-6)
    clipped = mx.nd.contrib.MultiBoxPrior(data, sizes=[0.5], ratios=[4], clip=True).asnumpy()
    assert clipped.min() >= 0.0 and clipped.max() <= 1.0
