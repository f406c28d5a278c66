"""MXNet's executor examples, unchanged except the import: bind, simple_bind, forward, backward."""

import mxtorch as mx

x, y = mx.sym.Variable('x'), mx.sym.Variable('y')
z = x + y
grads = {'x': mx.nd.zeros(1), 'y': mx.nd.zeros(1)}
ex = z.bind(mx.cpu(), {'x': mx.nd.array([1]), 'y': mx.nd.array([2])}, args_grad=grads)
ex.forward(is_train=True)
ex.backward(mx.nd.array([1]))
print("z =", ex.outputs[0].asnumpy(), " dz/dx =", grads['x'].asnumpy(), " dz/dy =", grads['y'].asnumpy())

ex = z.simple_bind(mx.cpu(), x=(1,), y=(1,))
ex.arg_arrays[0][:] = 1
ex.arg_arrays[1][:] = 5
ex.forward()
print("simple_bind: z =", ex.outputs[0].asnumpy())

w = mx.sym.Variable('w')
loss = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(x * w - y)))
ex = loss.simple_bind(mx.cpu(), x=(3,), w=(3,), y=(3,), grad_req={'w': 'write', 'x': 'null', 'y': 'null'})
ex.forward(is_train=True, x=mx.nd.array([1, 2, 3]), w=mx.nd.array([1, 1, 1]), y=mx.nd.array([2, 4, 6]))
ex.backward()
print("loss =", ex.outputs[0].asnumpy(), " dloss/dw =", ex.grad_dict['w'].asnumpy())
